"""The compile layer (architecture §1): the driver's ordered stages (parse, passes, offload, code
generation), the offline cache of compiled programs, kernel return values."""
