"""kernel_ir: the contract between the compiler and the code generators.

`nodes` / `ops` / `dtypes` (one frozen node type, an op enum, scalar types), `abi` (argument
buffer, bindings and the Adstack ABI), `builder` and `rewrite` (building and transforming IR),
`verifier` (the invariants, checked after every pass in tests), `printer`, `interpreter` (the
reference semantics), `errors` (every user-facing error class) and `source` (quoting a kernel's
source line with a caret in those errors).

Below everything that compiles: it imports nothing of the project but `sizer/`. Code generators
import it and never `spirad`; runtimes import neither (architecture §1).
"""
