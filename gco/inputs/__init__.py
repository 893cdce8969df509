"""What a user hands gco, read as a hostile caller would write it.

`strict_json` (duplicate keys, NaN, huge integers and deep nesting refused by name), `strict_yaml`
(YAML 1.2's core schema over PyYAML, the one YAML reader) and `input_files` (a named file read only if
it is a regular file, within a size bound). The CLI, the endpoint spec files
(`gco.endpoints.specfile`), the bench's manifests, prompts and clips, and `gco inference invoke`'s
bodies read through them. Their errors are drawn in `gco/errors.py`.
"""
