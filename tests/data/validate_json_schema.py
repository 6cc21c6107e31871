"""Validates documents against JSON Schemas with python3-jsonschema, for
tests/test_json_schema.cpp: reads a JSON file [{"schema": ..., "documents": [text, ...]}, ...]
and prints one line "<case> <document> <reason>" per document that is not JSON or does not
validate (formats checked as the schema's draft defines them), then "checked <n>"."""

import json
import sys

import jsonschema

cases = json.load(open(sys.argv[1], encoding="utf-8"))
checked = 0
for i, case in enumerate(cases):
    cls = jsonschema.validators.validator_for(case["schema"], default=jsonschema.Draft202012Validator)
    validator = cls(case["schema"], format_checker=cls.FORMAT_CHECKER)
    for j, text in enumerate(case["documents"]):
        checked += 1
        try:
            instance = json.loads(text)
        except ValueError as e:
            print(i, j, "not JSON:", e)
            continue
        for error in validator.iter_errors(instance):
            print(i, j, error.message.replace("\n", " "))
            break
print("checked", checked)
