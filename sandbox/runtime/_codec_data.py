"""Tagged encodings of numpy, pandas and sympy values, for the variables a round leaves (stdlib only).

The codec uses them when it encodes a round's variables (``encode(value, data=True)``) and decodes
them only inside the sandbox (``decode(obj, data=True)``), where the packages are installed. The host
never decodes them: it stores and forwards them as opaque JSON (its ``decode`` does not know these tags),
shows their ``class`` and ``repr``, and needs none of the packages. Nothing is pickled and nothing is
looked up by a name the data chooses, except sympy class names, checked against the ``sympy`` module.

=============  ==================================================================  ====================
tag            payload ``v``                                                        decodes to
=============  ==================================================================  ====================
``ndarray``    ``{"dtype": "<f8", "shape": [2, 3], "b64": <C-order bytes>}``;      ``numpy.ndarray``
               object arrays: ``{"dtype": "object", "shape", "items": [...]}``
``npscalar``   ``{"dtype", "b64"}``                                                 a numpy scalar
``pdscalar``   ``{"kind": "Timestamp" | "Timedelta", "ns", "tz", "unit"}``,         the pandas scalar
               ``{"kind": "NaT" | "NA"}``
``dataframe``  ``{"index": <index>, "columns": <index>, "data": [<column>...]}``     ``pandas.DataFrame``
``series``     ``{"index": <index>, "name": <value>, "data": <column>}``            ``pandas.Series``
``pdindex``    ``<index>``                                                          ``pandas.Index``
``sympy``      ``srepr(value)``                                                     the sympy object
=============  ==================================================================  ====================

An ``<index>`` is ``{"kind": "range", "v": [start, stop, step], "name"}``, ``{"kind": "multi", "v":
[tuples], "names"}`` or ``{"kind": "index", "v": <column>, "name"[, "freq"]}``; a ``<column>`` is
``{"np": <ndarray>}``, ``{"category": {"codes", "categories", "ordered"}}`` or ``{"ext": <dtype name>,
"items": [...]}``. Every tag also carries ``"class"`` (the type's name) and ``"repr"`` (a one-line repr,
at most 200 characters) for readers outside the sandbox. Pandas values and sympy objects are decoded
once after encoding and must compare equal (dtypes included), otherwise they are not encoded
(``Unencodable``: the value stays in the warm sandbox, without a snapshot).
"""

from __future__ import annotations

import binascii
import sys
from types import ModuleType

from codeact.sandbox.runtime._codec_types import TAG, JsonObject, JsonValue, Undecodable, Unencodable

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import ast
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Final, Protocol

__all__ = ["DATA_DECODERS", "DATA_MODULES", "DATA_TAGS", "encode_data"]

DATA_MODULES: Final = frozenset({"numpy", "pandas", "sympy"})
"""Top-level packages whose values have tagged encodings here."""

DATA_TAGS: Final = frozenset({"ndarray", "npscalar", "pdscalar", "dataframe", "series", "pdindex", "sympy"})

_REPR_CHARS: Final = 200
_DTYPE: Final = r"^[<>|=]?(?:b1|[iu][1248]|f(?:2|4|8|12|16)|c(?:8|16|24|32)|[mM]8(?:\[\d*\w+\])?|[SU]\d+)$"
"""The numpy dtypes carried as bytes (matched by ``_dtype_ok``)."""


if TYPE_CHECKING:  # the shapes the data encoders read: annotations only

    class DataEncoder(Protocol):
        """The codec's encoder, as the data encoders use it (``codec._Encoder``)."""

        def encode(self, value: object) -> JsonValue:
            """``value`` encoded (nested values of an array or a frame)."""
            ...

        def roundtrip(self, encoded: JsonValue) -> object:
            """``encoded`` decoded as the sandbox will restore it."""
            ...

    class _DType(Protocol):  # numpy.dtype, as far as the codec reads one
        kind: str
        str: str
        itemsize: int

    class _Array(Protocol):  # numpy.ndarray, as far as the codec reads one
        shape: tuple[int, ...]
        dtype: _DType

        def ravel(self, order: str) -> Iterable[object]: ...


def _one_line(value: object) -> str:
    try:
        text = " ".join(repr(value).split())
    except Exception:  # noqa: BLE001 - a value's own repr is sandboxed code
        return f"<{type(value).__name__}>"
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _tag(tag: str, value: object, payload: JsonValue) -> JsonObject:
    return {TAG: tag, "class": type(value).__name__, "repr": _one_line(value), "v": payload}


def encode_data(encoder: DataEncoder, value: object) -> JsonObject | None:
    """The tagged encoding of a numpy/pandas/sympy ``value``, or None when it is none of theirs.

    Args:
        encoder: The codec's encoder (``encode(nested)``, ``roundtrip(encoded)``).
        value: The value.

    Raises:
        Unencodable: A value of those packages that cannot be encoded faithfully (the reason says why).
    """
    top = str(getattr(type(value), "__module__", "") or "").partition(".")[0]
    if top not in DATA_MODULES:
        sympy = sys.modules.get("sympy")  # an applied Function('f') is of a class sympy made elsewhere
        if sympy is None or not isinstance(value, sympy.Basic):
            return None
        top = "sympy"
    if top == "numpy":
        return _numpy(encoder, value)
    if top == "pandas":
        return _pandas(encoder, value)
    return _sympy(encoder, value)


# -- numpy --------------------------------------------------------------------------------------------


def _numpy(encoder: DataEncoder, value: object) -> JsonObject | None:
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if type(value) is np.ndarray:
        return _tag("ndarray", value, _array(encoder, np, np.asarray(value)))  # the array itself, typed
    if isinstance(value, np.generic):
        arr = np.asarray(value)
        if arr.dtype.kind in "OV" or not _dtype_ok(arr.dtype.str):
            raise Unencodable(f"cannot encode a numpy scalar of dtype {arr.dtype}")
        return _tag("npscalar", value, {"dtype": arr.dtype.str, "b64": _b64(arr.tobytes())})
    return None


def _array(encoder: DataEncoder, np: ModuleType, arr: _Array) -> JsonObject:
    shape: list[JsonValue] = [int(n) for n in arr.shape]
    if arr.dtype.kind == "O":
        return {"dtype": "object", "shape": shape, "items": [encoder.encode(item) for item in arr.ravel(order="C")]}
    if not _dtype_ok(arr.dtype.str):
        raise Unencodable(f"cannot encode a numpy array of dtype {arr.dtype} (structured or void)")
    return {"dtype": arr.dtype.str, "shape": shape, "b64": _b64(np.ascontiguousarray(arr).tobytes())}


def _dtype_ok(text: str) -> bool:
    import re  # here: only numpy values get this far (numpy imports re itself); re caches the pattern

    return re.match(_DTYPE, text) is not None


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")  # base64.b64encode


def _import(name: str) -> ModuleType:
    try:
        return __import__(name)
    except ImportError:
        raise Undecodable(f"{name} is not installed in this sandbox (declare it: sandbox.packages)") from None


def _decode_array(payload: object) -> object:
    np = _import("numpy")
    if type(payload) is not dict:
        raise Undecodable("ndarray payload must be an object")
    shape = payload.get("shape")
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise Undecodable("ndarray shape must be a list of non-negative integers")
    count = 1
    for n in shape:
        count *= n
    if payload.get("dtype") == "object":
        items = payload.get("items")
        if type(items) is not list or len(items) != count:
            raise Undecodable("object ndarray items do not match its shape")
        out = np.empty(count, dtype=object)
        for i, item in enumerate(items):
            out[i] = item
        return out.reshape(shape)
    dtype = _dtype(np, payload.get("dtype"))
    raw = _raw(payload.get("b64"))
    if len(raw) != count * dtype.itemsize:
        raise Undecodable("ndarray bytes do not match its dtype and shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _dtype(np: ModuleType, text: object) -> _DType:
    if type(text) is not str or not _dtype_ok(text):
        raise Undecodable(f"unsupported numpy dtype {text!r}")
    dtype: _DType = np.dtype(text)
    return dtype


def _raw(text: object) -> bytes:
    if type(text) is not str:
        raise Undecodable("expected base64 text")
    try:
        return binascii.a2b_base64(text, strict_mode=True)  # base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise Undecodable(f"bad base64 payload: {exc}") from None


def _decode_npscalar(payload: object) -> object:
    np = _import("numpy")
    if type(payload) is not dict:
        raise Undecodable("npscalar payload must be an object")
    dtype = _dtype(np, payload.get("dtype"))
    raw = _raw(payload.get("b64"))
    if len(raw) != dtype.itemsize:
        raise Undecodable("npscalar bytes do not match its dtype")
    return np.frombuffer(raw, dtype=dtype)[0]


# -- pandas -------------------------------------------------------------------------------------------


def _pandas(encoder: DataEncoder, value: Any) -> JsonObject | None:  # a pandas value (untyped package)
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    kind = type(value)
    payload: JsonObject
    if kind is pd.DataFrame:
        payload = {
            "index": _index(encoder, pd, value.index),
            "columns": _index(encoder, pd, value.columns),
            "data": [_column(encoder, pd, value.iloc[:, i]) for i in range(value.shape[1])],
        }
        return _verified(encoder, _tag("dataframe", value, payload), value)
    if kind is pd.Series:
        payload = {
            "index": _index(encoder, pd, value.index),
            "name": encoder.encode(value.name),
            "data": _column(encoder, pd, value),
        }
        return _verified(encoder, _tag("series", value, payload), value)
    if isinstance(value, pd.Index):
        return _verified(encoder, _tag("pdindex", value, _index(encoder, pd, value)), value)
    if value is pd.NaT or value is pd.NA:
        return _tag("pdscalar", value, {"kind": "NaT" if value is pd.NaT else "NA"})
    if kind is pd.Timestamp:
        tz = None if value.tz is None else str(value.tz)
        return _tag("pdscalar", value, {"kind": "Timestamp", "ns": int(value.as_unit("ns").value), "tz": tz,
                                        "unit": str(value.unit)})  # fmt: skip
    if kind is pd.Timedelta:
        return _tag("pdscalar", value, {"kind": "Timedelta", "ns": int(value.as_unit("ns").value),
                                        "unit": str(value.unit)})  # fmt: skip
    return None


def _verified(encoder: DataEncoder, tagged: JsonObject, value: Any) -> JsonObject:  # value: a pandas value
    """``tagged`` when it decodes back to an equal value of the same type and dtypes, else Unencodable."""
    what = type(value).__name__
    try:
        back: Any = encoder.roundtrip(tagged)  # a pandas value like ``value``
        same = type(back) is type(value) and bool(back.equals(value))
        if same and hasattr(value, "dtypes"):
            same = [str(d) for d in back.dtypes] == [str(d) for d in value.dtypes] if what == "DataFrame" else True
        if same and hasattr(value, "dtype"):
            same = str(back.dtype) == str(value.dtype)
        if same and what == "DataFrame":
            same = bool(back.columns.equals(value.columns)) and bool(back.index.equals(value.index))
    except Exception as exc:  # noqa: BLE001 - any failure means the snapshot would not be faithful
        raise Unencodable(f"this {what} cannot be saved faithfully ({type(exc).__name__}: {exc})"[:300]) from None
    if not same:
        raise Unencodable(f"this {what} cannot be saved faithfully (it does not decode to an equal {what})")
    return tagged


def _index(encoder: DataEncoder, pd: ModuleType, index: Any) -> JsonObject:  # index: a pandas Index
    if type(index) is pd.RangeIndex:
        return {"kind": "range", "v": [index.start, index.stop, index.step], "name": encoder.encode(index.name)}
    if type(index) is pd.MultiIndex:
        return {"kind": "multi", "v": [encoder.encode(t) for t in index], "names": encoder.encode(list(index.names))}
    out: JsonObject = {"kind": "index", "v": _column(encoder, pd, index), "name": encoder.encode(index.name)}
    freq = getattr(index, "freqstr", None)
    if isinstance(freq, str):
        out["freq"] = freq
    return out


def _column(encoder: DataEncoder, pd: ModuleType, values: Any) -> JsonObject:  # values: a pandas column
    np = sys.modules["numpy"]
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return {"np": _tag("ndarray", values, _array(encoder, np, np.asarray(values)))}
    array = values.array
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "category": {
                "codes": _tag("ndarray", array.codes, _array(encoder, np, np.asarray(array.codes))),
                "categories": _index(encoder, pd, dtype.categories),
                "ordered": bool(dtype.ordered),
            }
        }
    return {"ext": str(dtype), "items": [encoder.encode(item) for item in array]}


def _decode_column(pd: ModuleType, column: object) -> object:
    if type(column) is not dict:
        raise Undecodable("a pandas column must be an object")
    if "np" in column:
        return column["np"]
    if "category" in column:
        spec = column["category"]
        if type(spec) is not dict:
            raise Undecodable("bad categorical column")
        categories = _decode_index(pd, spec.get("categories"))
        return pd.Categorical.from_codes(spec.get("codes"), categories=categories, ordered=bool(spec.get("ordered")))
    ext = column.get("ext")
    items = column.get("items")
    if type(ext) is not str or type(items) is not list:
        raise Undecodable("bad pandas column")
    return pd.array(items, dtype=ext)


def _decode_index(pd: ModuleType, spec: object) -> Any:  # a pandas Index
    if type(spec) is not dict:
        raise Undecodable("a pandas index must be an object")
    kind = spec.get("kind")
    if kind == "range":
        start, stop, step = spec.get("v") or (0, 0, 1)
        return pd.RangeIndex(int(start), int(stop), int(step), name=spec.get("name"))
    if kind == "multi":
        names = spec.get("names")
        return pd.MultiIndex.from_tuples(list(spec.get("v") or []), names=names)
    if kind == "index":
        values = _decode_column(pd, spec.get("v"))
        index = pd.Index(values, name=spec.get("name"), tupleize_cols=False)
        freq = spec.get("freq")
        if type(freq) is str and hasattr(index, "freq"):
            try:
                index = type(index)(index, freq=freq)
            except (TypeError, ValueError):
                pass
        return index
    raise Undecodable(f"unknown pandas index kind {kind!r}")


def _decode_dataframe(payload: object) -> object:
    pd = _import("pandas")
    if type(payload) is not dict or type(payload.get("data")) is not list:
        raise Undecodable("dataframe payload must hold a list of columns")
    index = _decode_index(pd, payload.get("index"))
    columns = _decode_index(pd, payload.get("columns"))
    data = [_decode_column(pd, c) for c in payload["data"]]
    if len(data) != len(columns):
        raise Undecodable("dataframe columns do not match its data")
    if not data:
        return pd.DataFrame(index=index, columns=columns)
    frame = pd.DataFrame({i: column for i, column in enumerate(data)}, index=index, copy=False)
    frame.columns = columns
    return frame


def _decode_series(payload: object) -> object:
    pd = _import("pandas")
    if type(payload) is not dict:
        raise Undecodable("series payload must be an object")
    return pd.Series(
        _decode_column(pd, payload.get("data")), index=_decode_index(pd, payload.get("index")), name=payload.get("name")
    )


def _decode_pdscalar(payload: Any) -> object:  # a non-dict payload fails at .get (AttributeError)
    pd = _import("pandas")
    kind = payload.get("kind") if type(payload) is dict else None
    if kind == "NaT":
        return pd.NaT
    if kind == "NA":
        return pd.NA
    ns = payload.get("ns")
    if type(ns) is not int:
        raise Undecodable("pandas scalar without nanoseconds")
    unit = payload.get("unit") if payload.get("unit") in ("s", "ms", "us", "ns") else "ns"
    if kind == "Timestamp":
        tz = payload.get("tz")
        stamp = pd.Timestamp(ns, unit="ns", tz="UTC" if tz else None)
        return (stamp.tz_convert(tz) if tz else stamp).as_unit(unit)
    if kind == "Timedelta":
        return pd.Timedelta(ns, unit="ns").as_unit(unit)
    raise Undecodable(f"unknown pandas scalar kind {kind!r}")


# -- sympy --------------------------------------------------------------------------------------------


def _sympy(encoder: DataEncoder, value: object) -> JsonObject | None:
    sympy = sys.modules.get("sympy")
    if sympy is None or not isinstance(value, sympy.Basic | sympy.MatrixBase):
        return None
    try:
        text = sympy.srepr(value)
        back = encoder.roundtrip({TAG: "sympy", "v": text})
        same = type(back) is type(value) and back == value
    except Exception as exc:  # noqa: BLE001 - the printer or the rebuild failed: not faithful
        reason = f"this sympy {type(value).__name__} cannot be saved ({type(exc).__name__}: {exc})"
        raise Unencodable(reason[:300]) from None
    if not same:
        raise Unencodable(f"this sympy {type(value).__name__} cannot be saved (its srepr does not rebuild it)")
    return _tag("sympy", value, text)


def _decode_sympy(payload: object) -> object:
    sympy = _import("sympy")
    if type(payload) is not str:
        raise Undecodable("sympy payload must be srepr text")
    import ast  # only a sympy value needs it: not imported at every runtime start

    try:
        tree = ast.parse(payload, mode="eval")
    except SyntaxError:
        raise Undecodable("sympy payload is not srepr text") from None
    return _SympyBuilder(sympy).build(tree.body)


class _SympyBuilder:
    """Rebuilds ``srepr`` text: calls of sympy classes on literals, never ``eval``."""

    def __init__(self, sympy: ModuleType) -> None:
        self.sympy = sympy

    def build(self, node: ast.expr) -> object:  # noqa: C901 - one case per node kind srepr writes
        import ast  # loaded by _decode_sympy: a dictionary look-up

        if isinstance(node, ast.Constant) and type(node.value) in (int, float, str, bool, type(None)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self.build(node.operand)
            if type(operand) is int or type(operand) is float:
                return -operand
        if isinstance(node, ast.List):
            return [self.build(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.build(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return {self.build(k): self.build(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "S":
            value = getattr(self.sympy.S, node.attr, None)
            if isinstance(value, self.sympy.Basic):
                return value
        if isinstance(node, ast.Call):
            func = self.build(node.func)
            if not isinstance(func, type):
                raise Undecodable("sympy srepr calls only sympy classes")
            args = [self.build(a) for a in node.args]
            kwargs = {k.arg: self.build(k.value) for k in node.keywords if k.arg is not None}
            return func(*args, **kwargs)
        raise Undecodable(f"unexpected {type(node).__name__} in sympy srepr text")

    def name(self, name: str) -> object:
        value = getattr(self.sympy, name, None) if not name.startswith("_") else None
        if isinstance(value, type) or isinstance(value, self.sympy.Basic):
            return value
        found = _sympy_classes(self.sympy).get(name)  # ExprCondPair and the like: not at the top level
        if found is not None:
            return found
        raise Undecodable(f"{name!r} is not a sympy class")


_SYMPY_CLASSES: dict[str, type] = {}


def _sympy_classes(sympy: ModuleType) -> dict[str, type]:
    """Every subclass of ``sympy.Basic`` defined in sympy's own modules, by name (built once)."""
    if not _SYMPY_CLASSES:
        todo = [sympy.Basic]
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            if str(getattr(cls, "__module__", "")).startswith("sympy."):
                _SYMPY_CLASSES.setdefault(cls.__name__, cls)
    return _SYMPY_CLASSES


DATA_DECODERS: Final[Mapping[str, Callable[[object], object]]] = {
    "ndarray": _decode_array,
    "npscalar": _decode_npscalar,
    "pdscalar": _decode_pdscalar,
    "dataframe": _decode_dataframe,
    "series": _decode_series,
    "pdindex": lambda payload: _decode_index(_import("pandas"), payload),
    "sympy": _decode_sympy,
}
"""Tag -> decoder of its (already decoded) payload; only the sandbox's runtime passes ``data=True``."""
