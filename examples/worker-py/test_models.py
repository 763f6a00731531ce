"""Checks the dataclasses of chronoq_worker.py against the schemas of
api/openapi.json, so that they cannot drift from the HTTP contract: each
field is a property of its schema with a matching type; an answer's
dataclass has every property the schema requires, a request's requires
exactly what the schema requires. Run: python3 -m unittest (in this
directory)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import typing
import unittest
from typing import Any

import chronoq_worker

DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / "api" / "openapi.json"

# The dataclasses decoded from answers; the others are request bodies.
ANSWERS = {chronoq_worker.Backoff, chronoq_worker.ClaimedJob, chronoq_worker.ClaimedJobs, chronoq_worker.Lease}

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def ref(schema: dict[str, Any]) -> str | None:
    """The name of the component schema that schema is (a $ref, or an allOf
    of one), if it is one."""
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return ref(schema["allOf"][0])
    r = schema.get("$ref")
    return r.removeprefix("#/components/schemas/") if r else None


class ModelsTest(unittest.TestCase):
    doc: dict[str, Any]

    @classmethod
    def setUpClass(cls) -> None:
        cls.doc = json.loads(DOCUMENT.read_text())

    def check_type(self, where: str, hint: Any, prop: dict[str, Any]) -> None:
        """hint, a field's annotation, is what prop says the JSON holds."""
        nullable = prop.get("nullable", False)
        name = ref(prop)
        if name is not None and not dataclasses.is_dataclass(hint):
            prop = self.doc["components"]["schemas"][name]
        args = typing.get_args(hint)
        if typing.get_origin(hint) is typing.Union and type(None) in args:
            (hint,) = [a for a in args if a is not type(None)]
            self.assertTrue(nullable or where.endswith("?"), f"{where}: Optional, but the schema has no null")
        if hint is Any:
            self.assertNotIn("type", prop, f"{where}: Any, but the schema says {prop.get('type')}")
            return
        if dataclasses.is_dataclass(hint):
            self.assertEqual(hint.SCHEMA, name, f"{where}: {hint.__name__} against {prop}")
            return
        origin = typing.get_origin(hint) or hint
        self.assertEqual(JSON_TYPES.get(origin), prop.get("type"), f"{where}: {hint} against {prop}")
        if origin is list:
            (item,) = typing.get_args(hint)
            self.check_type(f"{where}[]", item, prop["items"])

    def test_models_match_the_document(self) -> None:
        self.assertTrue(chronoq_worker.MODELS)
        for model in chronoq_worker.MODELS:
            with self.subTest(model.__name__):
                schema = self.doc["components"]["schemas"][model.SCHEMA]
                props, required = schema["properties"], set(schema.get("required", []))
                hints = typing.get_type_hints(model)
                fields = {f.name: f for f in dataclasses.fields(model)}
                for name, f in fields.items():
                    self.assertIn(name, props, f"{model.__name__}.{name} is no property of {model.SCHEMA}")
                    optional = "?" if name not in required else ""
                    self.check_type(f"{model.__name__}.{name}{optional}", hints[name], props[name])
                has_default = {n for n, f in fields.items() if f.default is not dataclasses.MISSING}
                if model in ANSWERS:
                    self.assertLessEqual(required, set(fields), f"{model.__name__} lacks required properties")
                    self.assertFalse(has_default & required, f"{model.__name__}: a required property has a default")
                else:
                    self.assertEqual(required, set(fields) - has_default, f"{model.__name__}: required fields")

    def test_decode_ignores_unknown_fields(self) -> None:
        lease = chronoq_worker._decode(
            chronoq_worker.Lease, {"lease_until": "2030-01-02T03:04:05.000Z", "cancel_requested": False, "new": 1}
        )
        self.assertEqual(chronoq_worker.Lease("2030-01-02T03:04:05.000Z", False), lease)
        with self.assertRaisesRegex(TypeError, "cancel_requested"):
            chronoq_worker._decode(chronoq_worker.Lease, {"lease_until": "2030-01-02T03:04:05.000Z"})

    def test_encode_leaves_out_none_but_not_inside_a_result(self) -> None:
        body = chronoq_worker._encode(chronoq_worker.Complete("t", {"a": None}))
        self.assertEqual({"token": "t", "result": {"a": None}}, body)
        hb = chronoq_worker._encode(chronoq_worker.Heartbeat("t", progress=chronoq_worker.ProgressRequest(50)))
        self.assertEqual({"token": "t", "progress": {"percent": 50}}, hb)

    def test_parse_duration(self) -> None:
        for s, want in [("0", 0.0), ("0s", 0.0), ("250ms", 0.25), ("1m30s", 90.0), ("1.5s", 1.5), ("2h", 7200.0), ("10us", 1e-5)]:
            self.assertAlmostEqual(want, chronoq_worker.parse_duration(s), msg=s)
        for bad in ["", "5", "s", "1x", "-1s", "1s "]:
            with self.assertRaises(ValueError, msg=bad):
                chronoq_worker.parse_duration(bad)


if __name__ == "__main__":
    unittest.main()
