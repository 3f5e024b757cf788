"""tests/io/dlpack_interop.py: DLPack between cuttle and NumPy / PyTorch, run by
tests/io/test_interop_dlpack.c as

    dlpack_interop.py LIBCUTTLE_SO

It loads libcuttle.so with ctypes and wraps the DLManagedTensor that ct_to_dlpack returns in a
PyCapsule named "dltensor" (the Python array API's protocol; the capsule's destructor calls the
deleter when no consumer took it, as PyTorch's own capsules do). Checked:
  - numpy.from_dlpack and torch.from_dlpack see cuttle's values, strides (a transpose, a slice with
    an offset, channels_last) and memory (the same address), for every dtype each of them has;
  - a write through either side is seen by the other (cuttle writes with ct_copy_);
  - the consumer's array outlives cuttle's tensor (freed first);
  - a PyTorch tensor (torch.utils.dlpack.to_dlpack) and a NumPy array (ndarray.__dlpack__) imported
    into cuttle: the same memory, strides of a transposed tensor, an op (ct_mul, ct_sum) equal to
    PyTorch's, and autograd with the import as a leaf (the gradient of sum(t * t) is 2 t);
  - a capsule no consumer took is released through its destructor.
Prints what it checked; exits non-zero with a message at the first difference."""
import ctypes as C
import sys

import numpy as np
import torch
import torch.utils.dlpack

lib = C.CDLL(sys.argv[1])

CT = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "int32": 4, "int64": 5, "uint8": 6, "bool": 7}
CT_CHANNELS_LAST = 1


class Device(C.Structure):
    _fields_ = [("kind", C.c_int), ("index", C.c_int)]


CPU = Device(0, 0)


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


DELETER = C.CFUNCTYPE(None, C.c_void_p)


class DLManagedTensor(C.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", DELETER)]


def sig(name, restype, *args):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(args)
    return f


P = C.c_void_p
I64P = C.POINTER(C.c_int64)
ct_from_host = sig("ct_from_host", P, P, C.c_int, I64P, C.c_int, Device)
ct_full = sig("ct_full", P, C.c_int, I64P, C.c_double, C.c_int, Device)
ct_to_dlpack = sig("ct_to_dlpack", P, P)
ct_from_dlpack = sig("ct_from_dlpack", P, P)
ct_tensor_free = sig("ct_tensor_free", None, P)
ct_tensor_data = sig("ct_tensor_data", P, P)
ct_tensor_ndim = sig("ct_tensor_ndim", C.c_int, P)
ct_tensor_shape = sig("ct_tensor_shape", I64P, P)
ct_tensor_strides = sig("ct_tensor_strides", I64P, P)
ct_to_host = sig("ct_to_host", C.c_int, P, P, C.c_size_t, C.c_int)
ct_copy_ = sig("ct_copy_", C.c_int, P, P)
ct_transpose = sig("ct_transpose", P, P, C.c_int, C.c_int)
ct_slice = sig("ct_slice", P, P, C.c_int, C.c_int64, C.c_int64, C.c_int64)
ct_contiguous_format = sig("ct_contiguous_format", P, P, C.c_int)
ct_mul = sig("ct_mul", P, P, P)
ct_sum = sig("ct_sum", P, P, C.c_int, P, C.c_int)
ct_item = sig("ct_item", C.c_double, P)
ct_backward = sig("ct_backward", C.c_int, P)
ct_grad = sig("ct_grad", P, P)
ct_requires_grad_ = sig("ct_requires_grad_", C.c_int, P, C.c_int)
ct_last_error = sig("ct_last_error", C.c_char_p)

PyCapsule_New = C.pythonapi.PyCapsule_New
PyCapsule_New.restype, PyCapsule_New.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
PyCapsule_GetPointer = C.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype, PyCapsule_GetPointer.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
PyCapsule_SetName = C.pythonapi.PyCapsule_SetName
PyCapsule_SetName.restype, PyCapsule_SetName.argtypes = C.c_int, [C.py_object, C.c_char_p]
PyCapsule_IsValid = C.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.restype, PyCapsule_IsValid.argtypes = C.c_int, [C.c_void_p, C.c_char_p]
# the same function for a raw PyObject * (a separate ctypes function object, so its argtypes differ)
PyCapsule_GetPointer_raw = C.pythonapi["PyCapsule_GetPointer"]
PyCapsule_GetPointer_raw.restype, PyCapsule_GetPointer_raw.argtypes = C.c_void_p, [C.c_void_p, C.c_char_p]
released = [0]


@C.CFUNCTYPE(None, C.c_void_p)
def capsule_destructor(capsule):
    """Called when a capsule dies: only an unconsumed one ("dltensor") still owns its struct."""
    if PyCapsule_IsValid(capsule, b"dltensor"):
        m = C.cast(PyCapsule_GetPointer_raw(capsule, b"dltensor"), C.POINTER(DLManagedTensor))
        m.contents.deleter(C.cast(m, C.c_void_p))
        released[0] += 1


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def check(t, what):
    if not t:
        fail(f"{what}: {ct_last_error().decode()}")
    return t


class Exported:
    """An object with the array API's __dlpack__ / __dlpack_device__ over a cuttle tensor."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        m = check(ct_to_dlpack(self.t), "ct_to_dlpack")
        return PyCapsule_New(m, b"dltensor", C.cast(capsule_destructor, C.c_void_p))

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def cuttle_tensor(values, dtype):
    a = np.ascontiguousarray(values)
    shape = (C.c_int64 * a.ndim)(*a.shape)
    return check(ct_from_host(a.ctypes.data, a.ndim, shape, CT[dtype], CPU), "ct_from_host")


def host_values(t, np_dtype, shape):
    out = np.empty(shape, dtype=np_dtype)
    if ct_to_host(t, out.ctypes.data, out.nbytes, CT[np.dtype(np_dtype).name]) != 0:
        fail(ct_last_error().decode())
    return out


def strides_of(t):
    n = ct_tensor_ndim(t)
    return tuple(ct_tensor_strides(t)[i] for i in range(n)), tuple(ct_tensor_shape(t)[i] for i in range(n))


def fill(t, value, dtype):
    """cuttle writes value into every element of t (ct_copy_ from a 0-dim tensor)."""
    s = check(ct_full(0, None, value, CT[dtype], CPU), "ct_full")
    if ct_copy_(t, s) != 0:
        fail(ct_last_error().decode())
    ct_tensor_free(s)


base = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5) - 50.0


def test_to_numpy():
    for name in ["float64", "float32", "float16", "int64", "int32", "uint8"]:
        vals = (base % 200 if name == "uint8" else base).astype(name)
        t = cuttle_tensor(vals, name)
        for label, view in [("whole", t), ("transpose", check(ct_transpose(t, 1, 3), "transpose")),
                            ("slice", check(ct_slice(t, 2, 1, 3, 1), "slice"))]:
            a = np.from_dlpack(Exported(view))
            st, sh = strides_of(view)
            if a.shape != sh or tuple(s // a.itemsize for s in a.strides) != st:
                fail(f"numpy {name} {label}: shape {a.shape} strides {a.strides}, cuttle {sh} {st}")
            if a.ctypes.data != ct_tensor_data(view):
                fail(f"numpy {name} {label}: a copy (address {a.ctypes.data:#x}, cuttle {ct_tensor_data(view):#x})")
            want = host_values(view, name, sh)
            if not np.array_equal(a, want):
                fail(f"numpy {name} {label}: values differ")
            if view is not t:
                ct_tensor_free(view)
        ct_tensor_free(t)
    print("numpy.from_dlpack: float64, float32, float16, int64, int32, uint8, whole / transposed / sliced: "
          "cuttle's memory, strides and values")
    # writes both ways, and numpy's array outliving cuttle's tensor
    # NumPy 1.x marks what from_dlpack gives read-only (NumPy 2 does not); its writes are checked in
    # test_from_numpy, through an array cuttle imported
    t = cuttle_tensor(base.astype("float32"), "float32")
    a = np.from_dlpack(Exported(t))
    fill(t, 7.0, "float32")
    if not (a == 7.0).all():
        fail("cuttle's write is not seen by numpy")
    ct_tensor_free(t)
    if not (a == 7.0).all():  # the memory is still there
        fail("numpy's array after cuttle freed its tensor")
    del a
    print("numpy: cuttle's writes are seen; the array outlives cuttle's tensor")


def test_to_torch():
    for name, tdt in [("float64", torch.float64), ("float32", torch.float32), ("float16", torch.float16),
                      ("bfloat16", torch.bfloat16), ("int64", torch.int64), ("int32", torch.int32),
                      ("uint8", torch.uint8)]:
        src = torch.from_numpy(base % 200 if name == "uint8" else base).to(tdt)
        host = src.contiguous()
        t = check(ct_from_host(host.data_ptr(), 4, (C.c_int64 * 4)(*host.shape), CT[name], CPU), "ct_from_host")
        cl = check(ct_contiguous_format(t, CT_CHANNELS_LAST), "channels_last")
        for label, view in [("whole", t), ("channels_last", cl)]:
            x = torch.utils.dlpack.from_dlpack(Exported(view).__dlpack__())
            st, sh = strides_of(view)
            if tuple(x.shape) != sh or tuple(x.stride()) != st or x.dtype != tdt:
                fail(f"torch {name} {label}: {x.dtype} shape {tuple(x.shape)} strides {x.stride()}, cuttle {sh} {st}")
            if x.data_ptr() != ct_tensor_data(view):
                fail(f"torch {name} {label}: a copy")
            if not torch.equal(x, src):
                fail(f"torch {name} {label}: values differ")
            if label == "channels_last" and not x.is_contiguous(memory_format=torch.channels_last):
                fail(f"torch {name}: not channels_last")
            del x
        ct_tensor_free(cl)
        ct_tensor_free(t)
    print("torch.from_dlpack: float64, float32, float16, bfloat16, int64, int32, uint8, whole and channels_last: "
          "cuttle's memory, strides and values")
    t = cuttle_tensor(base.astype("float32"), "float32")
    x = torch.utils.dlpack.from_dlpack(Exported(t).__dlpack__())
    x[0, 1, 2, 3] = -99.0
    if host_values(t, "float32", tuple(x.shape))[0, 1, 2, 3] != -99.0:
        fail("torch's write is not seen by cuttle")
    fill(t, 3.0, "float32")
    if not bool((x == 3.0).all()):
        fail("cuttle's write is not seen by torch")
    ct_tensor_free(t)
    x.add_(1)
    if not bool((x == 4.0).all()):
        fail("torch's tensor after cuttle freed its tensor")
    print("torch: writes seen both ways; the tensor outlives cuttle's")
    # bool goes out as kDLBool (DLPack 0.8); PyTorch 1.x predates it and must say so, not misread it
    t = cuttle_tensor(np.array([True, False, True]), "bool")
    try:
        xb = torch.utils.dlpack.from_dlpack(Exported(t).__dlpack__())
        if xb.tolist() != [True, False, True]:
            fail(f"torch reads cuttle's bool as {xb.tolist()}")
        print(f"torch {torch.__version__} reads kDLBool")
    except Exception as e:  # the capsule was not consumed: its destructor released the struct
        print(f"torch {torch.__version__} refuses kDLBool (DLPack 0.8's code): {str(e).splitlines()[0]}")
    ct_tensor_free(t)


def from_capsule(cap):
    """cuttle takes the struct of a "dltensor" capsule over, as a consumer does."""
    m = PyCapsule_GetPointer(cap, b"dltensor")
    t = check(ct_from_dlpack(m), "ct_from_dlpack")
    PyCapsule_SetName(cap, b"used_dltensor")  # the capsule no longer owns it
    return t


def test_from_torch():
    x = torch.randn(3, 4, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    t = from_capsule(torch.utils.dlpack.to_dlpack(x))
    if ct_tensor_data(t) != x.data_ptr():
        fail("ct_from_dlpack copied PyTorch's tensor")
    y = check(ct_sum(check(ct_mul(t, t), "mul"), 0, None, 0), "sum")
    if abs(ct_item(y) - float((x * x).sum())) > 1e-5:
        fail(f"sum(t * t): cuttle {ct_item(y)}, torch {float((x * x).sum())}")
    # autograd, the import as a leaf
    if ct_requires_grad_(t, 1) != 0:
        fail(ct_last_error().decode())
    loss = check(ct_sum(check(ct_mul(t, t), "mul"), 0, None, 0), "sum")
    if ct_backward(loss) != 0:
        fail(ct_last_error().decode())
    g = host_values(check(ct_grad(t), "grad"), "float32", (3, 4))
    if not np.allclose(g, 2 * x.numpy(), rtol=0, atol=1e-6):
        fail("the gradient of sum(t * t) is not 2 t")
    # writes both ways
    x[1, 1] = 42.0
    if host_values(t, "float32", (3, 4))[1, 1] != 42.0:
        fail("torch's write is not seen by the cuttle import")
    fill(t, -1.5, "float32")
    if not bool((x == -1.5).all()):
        fail("cuttle's write is not seen by torch")
    ct_tensor_free(t)  # torch's deleter runs here; x still owns its storage
    if not bool((x == -1.5).all()):
        fail("x after cuttle released it")
    # a transposed torch tensor keeps its strides
    z = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
    tz = from_capsule(torch.utils.dlpack.to_dlpack(z))
    st, sh = strides_of(tz)
    if st != tuple(z.stride()) or sh != tuple(z.shape) or not np.array_equal(host_values(tz, "float64", sh), z.numpy()):
        fail(f"transposed torch tensor: cuttle strides {st}, torch {z.stride()}")
    ct_tensor_free(tz)
    print("torch -> cuttle: no copy, an op and autograd as a leaf equal PyTorch's, writes seen both ways, "
          "a transpose keeps its strides")


def test_from_numpy():
    a = (np.arange(20, dtype=np.int32).reshape(4, 5) * 3)[:, 1:4]
    t = from_capsule(a.__dlpack__())
    st, sh = strides_of(t)
    if ct_tensor_data(t) != a.ctypes.data or st != tuple(s // 4 for s in a.strides):
        fail("numpy -> cuttle: a copy or other strides")
    if not np.array_equal(host_values(t, "int32", sh), a):
        fail("numpy -> cuttle: values")
    a[2, 1] = -7
    if host_values(t, "int32", sh)[2, 1] != -7:
        fail("numpy's write is not seen by the cuttle import")
    fill(t, 11, "int32")
    if not (a == 11).all():
        fail("cuttle's write is not seen by numpy")
    ct_tensor_free(t)
    print("numpy -> cuttle: a sliced int32 array, no copy, its strides and values, writes seen both ways")


def test_unconsumed_capsule():
    t = cuttle_tensor(base.astype("float32"), "float32")
    before = released[0]
    cap = Exported(t).__dlpack__()
    del cap
    if released[0] != before + 1:
        fail("an unconsumed capsule did not release its struct")
    ct_tensor_free(t)
    print("an unconsumed capsule released its struct through the deleter")


test_to_numpy()
test_to_torch()
test_from_torch()
test_from_numpy()
test_unconsumed_capsule()
