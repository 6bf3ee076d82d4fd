"""What a launch records on (architecture §1, the "ad" layer): the reverse-mode `Tape`, forward
mode's `FwdMode`, custom gradients (`grad_replaced`, `no_grad`), `Tape(grad_check=...)` and
`Tape(validation=True)`. Below `spirad.kernel`, which records every launch here; the user
namespace `sd.ad` (spirad/ad/) re-exports these names beside checkpointed time stepping,
which builds kernels and so sits above them."""
