"""The user's data (architecture §2): fields and the SNode builder, ndarrays, small matrices and
vectors, structs, struct kernel arguments and the host methods they share."""
