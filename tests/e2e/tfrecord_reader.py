"""An independent reader of TensorBoard event files (docs/design/outputs.md#tensorboard), written from the
TFRecord and protobuf wire formats without TensorFlow (Debian packages neither): it checks both
masked CRC32C values of every record and decodes tensorflow.Event / Summary / Value."""
import struct


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of one protobuf message; bytes for length-delimited."""
    i, out = 0, []
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unsupported wire type {wt}")
        out.append((field, wt, v))
    return out


def records(path):
    """Payloads of the TFRecord file; raises ValueError on a bad CRC or a truncated record."""
    with open(path, "rb") as f:
        data = f.read()
    i, out = 0, []
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError(f"truncated header at {i}")
        hdr = data[i:i + 8]
        (n,) = struct.unpack("<Q", hdr)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hcrc != masked_crc(hdr):
            raise ValueError(f"bad length crc at {i}")
        body = data[i + 12:i + 12 + n]
        if len(body) != n or i + 16 + n > len(data):
            raise ValueError(f"truncated record at {i}")
        (dcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if dcrc != masked_crc(body):
            raise ValueError(f"bad data crc at {i}")
        out.append(body)
        i += 16 + n
    return out


def events(path):
    """[{wall_time, step, file_version?, values: [(tag, simple_value)]}] of an event file."""
    out = []
    for body in records(path):
        ev = {"step": 0, "values": []}
        for field, wt, v in _fields(body):
            if field == 1 and wt == 1:
                ev["wall_time"] = struct.unpack("<d", v)[0]
            elif field == 2 and wt == 0:
                ev["step"] = v
            elif field == 3 and wt == 2:
                ev["file_version"] = v.decode()
            elif field == 5 and wt == 2:
                for sf, swt, sv in _fields(v):
                    if sf == 1 and swt == 2:
                        tag, val = None, None
                        for vf, vwt, vv in _fields(sv):
                            if vf == 1 and vwt == 2:
                                tag = vv.decode()
                            elif vf == 2 and vwt == 5:
                                val = struct.unpack("<f", vv)[0]
                        ev["values"].append((tag, val))
        out.append(ev)
    return out


def scalars(path):
    """{tag: [(step, value), ...]} in file order."""
    out = {}
    for ev in events(path):
        for tag, val in ev["values"]:
            out.setdefault(tag, []).append((ev["step"], val))
    return out
