"""A uniform view of NumPy arrays and torch tensors for the binding: shape,
element strides, dtype name, device and data pointer, read without copying
and without synchronising a GPU. torch is only imported when a tensor is seen,
so the package works with NumPy alone.
"""

import sys

# dtype names as both NumPy and torch spell them (torch after "torch.").
FLOAT_DTYPES = ("float16", "bfloat16", "float32")


class ArrayInfo:
    __slots__ = ("name", "obj", "kind", "shape", "strides", "dtype", "device", "ptr", "writable")

    def __init__(self, name, obj, kind, shape, strides, dtype, device, ptr, writable):
        self.name = name          # the argument's name, for error messages
        self.obj = obj
        self.kind = kind          # "numpy" or "torch"
        self.shape = shape        # tuple of ints
        self.strides = strides    # tuple of ints, in elements
        self.dtype = dtype        # "float16", "bfloat16", "float32", "int32", ...
        self.device = device      # ("cpu", 0) or ("cuda", index)
        self.ptr = ptr            # int address of element 0
        self.writable = writable

    @property
    def ndim(self):
        return len(self.shape)

    def is_contiguous(self):
        """C order; dims of size 1 (and empty arrays) may carry any strides, as in torch."""
        if 0 in self.shape:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def describe(self):
        return "%s %s on %s" % (self.dtype, list(self.shape), self.device[0])


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def info(name, obj):
    """ArrayInfo for a NumPy array or torch tensor; TypeError for anything else."""
    if _is_torch(obj):
        dev = obj.device
        if dev.type == "cpu":
            device = ("cpu", 0)
        elif dev.type == "cuda":
            import torch
            device = ("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
        else:
            raise TypeError("%s: tensors on device '%s' are not supported (cpu or cuda)"
                            % (name, dev.type))
        return ArrayInfo(name, obj, "torch", tuple(obj.shape), tuple(obj.stride()),
                         str(obj.dtype).replace("torch.", ""), device, obj.data_ptr(), True)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        item = obj.dtype.itemsize
        if any(s % item for s in obj.strides):
            raise ValueError("%s: strides %s are not a multiple of the element size %d"
                             % (name, obj.strides, item))
        return ArrayInfo(name, obj, "numpy", tuple(obj.shape),
                         tuple(s // item for s in obj.strides), obj.dtype.name, ("cpu", 0),
                         obj.ctypes.data, obj.flags.writeable)
    raise TypeError("%s: expected a torch.Tensor or numpy.ndarray, got %s"
                    % (name, type(obj).__name__))
