"""Host-side methods Quadrants gives every tensor (spirad.data.tensor), mixed into fields and
ndarrays (`field._HostArray`). Kept apart from spirad.data.tensor, which imports the field module."""
from __future__ import annotations

import numpy as np


class TensorSurface:
    """Host-side methods of Quadrants' tensors, shared by fields and ndarrays."""

    @property
    def element_shape(self) -> tuple:
        return tuple(self.comp_shape)

    @property
    def layout(self):
        return None  # canonical storage (see the module docstring)

    def has_grad(self) -> bool:
        return bool(self.needs_grad)

    def has_dual(self) -> bool:
        return bool(self.needs_dual)

    def _unwrap(self):
        return self

    def _zero_copy_view(self, words_for_bools=False):
        """The live host memory as numpy (zero-copy), or None where there is none: device
        memory, or u1 elements (stored as 4-byte 0/1 words, which no bool view can alias;
        `words_for_bools`: those words, as int32)."""
        from ..runtime import state as _state
        from kernel_ir import dtypes as T
        order = self._axis_order() if self._perm() is not None else None
        if (self.dtype == T.u1 and not words_for_bools) or \
                (self._perm() is not None and order is None) or \
                _state.backend().host_storage(self._storage()) is None:
            return None
        from ..runtime.program_hooks import materialize_if_needed
        materialize_if_needed()  # exported memory: deferred fills first (spirad.runtime.program_hooks)
        if order is not None:  # axes permuted in storage: a strided view in index order
            view = self._flat_view().reshape(tuple(self.shape[a] for a in order)
                                             + tuple(self.comp_shape))
            view = view.transpose(tuple(np.argsort(order))
                                  + tuple(range(len(order), view.ndim)))
        else:
            view = self._view()
        return view.view(np.int32) if self.dtype == T.u1 else view

    def _axis_order(self):
        """The storage order of the axes where the storage only permutes them, else None."""
        return None

    def to_dlpack(self, versioned: bool = False):
        view = self._zero_copy_view()
        return (view if view is not None else self.to_numpy()).__dlpack__()
