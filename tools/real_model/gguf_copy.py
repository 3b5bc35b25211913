"""Copying a GGUF with gguf-py, for the scripts that write models derived from one (early exits, the adapter
draft, the shuffled check): its metadata with some values changed, then the tensors given, in order."""
import gguf


def copy_fields(reader, writer, changed):
    """Every key-value pair of `reader` into `writer` but those GGUFWriter writes itself; `changed(name, value)`
    returns the value to write (the same one to keep it)."""
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # virtual fields, or written by GGUFWriter itself
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, changed(field.name, field.contents()), field.types[0], sub_type=sub_type)


def write_model(reader, out_path, changed, tensors):
    """A GGUF at `out_path` with `reader`'s metadata (through `changed`) and `tensors`: (name, numpy data,
    ggml type) with the data as GGUFReader gives it (quantized rows as bytes) or as a numpy array of that type."""
    writer = gguf.GGUFWriter(str(out_path), reader.fields["general.architecture"].contents(), endianess=reader.endianess)
    copy_fields(reader, writer, changed)
    for name, data, qtype in tensors:
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in tensors:
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
    writer.close()
