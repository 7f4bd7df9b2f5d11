package events

// The JSON Schemas of docs/schemas are usable as they are by the validators producers use:
// each has an absolute $id (its references resolve by it), and each holds to the rules of
// Ajv's strict mode (Ajv, the most used JavaScript validator, refuses by default to compile
// a schema that breaks them, or logs them): only known keywords, a "type" wherever a keyword
// applies to one type only, no union of types other than with null, "required" naming
// defined properties, no patternProperties overlapping properties, no "if" without
// "then" or "else".

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// schemaKeywords are the keywords the schemas may use (JSON Schema 2020-12), each with the
// JSON type it applies to ("" for any: applicators, annotations, enum and const).
var schemaKeywords = map[string]string{
	"$schema": "", "$id": "", "$ref": "", "$defs": "", "title": "", "description": "",
	"type": "", "const": "", "enum": "", "anyOf": "", "allOf": "", "oneOf": "", "not": "",
	"if": "", "then": "", "else": "",
	"properties": "object", "patternProperties": "object", "required": "object", "additionalProperties": "object", "propertyNames": "object",
	"items": "array", "minItems": "array", "maxItems": "array",
	"minimum": "number", "maximum": "number",
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
}

// schemaFileNames lists the file names of docs/schemas.
func schemaFileNames(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(docsDir(t), "schemas", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no docs/schemas/*.json: %v", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}

func TestSchemasAreStrict(t *testing.T) {
	for _, name := range schemaFileNames(t) {
		t.Run(name, func(t *testing.T) {
			doc := rawSchema(t, name)
			if got, want := doc["$id"], schemaBaseURI+name; got != want {
				t.Errorf("$id %v, want %s", got, want)
			}
			for _, problem := range lintSchema(doc, "#", nil, true) {
				t.Error(problem)
			}
		})
	}
}

// The lint finds what it is meant to find.
func TestSchemaLint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema map[string]any
		want   []string
	}{
		{"fine", map[string]any{"type": "object", "required": []any{"a"}, "properties": map[string]any{
			"a": map[string]any{"type": []any{"string", "null"}, "maxLength": 3.0},
			"b": map[string]any{"anyOf": []any{map[string]any{"type": "integer", "minimum": 0.0}, map[string]any{"type": "null"}}}}}, nil},
		{"properties without type object", map[string]any{"properties": map[string]any{}},
			[]string{`#: "properties" applies to objects; give the schema "type": "object"`}},
		{"a type from an applicator's parent counts", map[string]any{"type": "string", "anyOf": []any{map[string]any{"pattern": "^a"}}}, nil},
		{"union type", map[string]any{"type": []any{"string", "integer"}},
			[]string{`#: "type" ["integer" "string"] is a union (Ajv's strict types: use anyOf)`}},
		{"unknown keyword", map[string]any{"type": "string", "maxlength": 3.0},
			[]string{`#: unknown keyword "maxlength"`}},
		{"required not defined", map[string]any{"type": "object", "required": []any{"a"}},
			[]string{`#: "required" names "a", which "properties" does not define`}},
		{"if alone", map[string]any{"if": map[string]any{}},
			[]string{`#: "if" without "then" or "else"`}},
		{"overlapping patternProperties", map[string]any{"type": "object", "properties": map[string]any{"ab": map[string]any{}},
			"patternProperties": map[string]any{"^a": map[string]any{}}},
			[]string{`#: patternProperties "^a" matches the property "ab" (Ajv's strict mode refuses the overlap)`}},
		{"nested $id", map[string]any{"$defs": map[string]any{"x": map[string]any{"$id": "y"}}},
			[]string{`#/$defs/x: "$id" below the root`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lintSchema(tc.schema, "#", nil, true); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// lintSchema returns the problems of the schema n at where; types are the types in force
// for its instance (from a parent whose applicator leads here: anyOf, allOf, oneOf, not,
// if, then, else), root whether n is a document's root.
func lintSchema(n map[string]any, where string, types []string, root bool) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, where+": "+fmt.Sprintf(format, args...)) }
	if own, ok := n["type"]; ok {
		types = stringList(own)
		if list, ok := own.([]any); ok && !(len(list) == 1 || len(list) == 2 && slices.Contains(types, "null")) {
			add(`"type" %q is a union (Ajv's strict types: use anyOf)`, types)
		}
	}
	for _, kw := range sortedKeys(n) {
		applies, known := schemaKeywords[kw]
		switch {
		case !known:
			add("unknown keyword %q", kw)
		case kw == "$id" && !root:
			add(`"$id" below the root`)
		case applies == "number" && !slices.Contains(types, "number") && !slices.Contains(types, "integer"),
			applies != "" && applies != "number" && !slices.Contains(types, applies):
			add(`%q applies to %ss; give the schema "type": %q`, kw, applies, applies)
		}
	}
	props, _ := n["properties"].(map[string]any)
	for _, r := range stringList(n["required"]) {
		if _, ok := props[r]; !ok {
			add(`"required" names %q, which "properties" does not define`, r)
		}
	}
	pats, _ := n["patternProperties"].(map[string]any)
	for _, pat := range sortedKeys(pats) {
		re, err := regexp.Compile(pat)
		if err != nil {
			add("patternProperties %q: %v", pat, err)
			continue
		}
		for _, name := range sortedKeys(props) {
			if re.MatchString(name) {
				add("patternProperties %q matches the property %q (Ajv's strict mode refuses the overlap)", pat, name)
			}
		}
	}
	_, hasIf := n["if"]
	_, hasThen := n["then"]
	_, hasElse := n["else"]
	if hasIf != (hasThen || hasElse) {
		if hasIf {
			add(`"if" without "then" or "else"`)
		} else {
			add(`"then" or "else" without "if"`)
		}
	}
	sub := func(v any, at string, types []string) {
		if m, ok := v.(map[string]any); ok {
			out = append(out, lintSchema(m, at, types, false)...)
		}
	}
	for _, kw := range []string{"anyOf", "allOf", "oneOf"} {
		list, _ := n[kw].([]any)
		for i, v := range list {
			sub(v, fmt.Sprintf("%s/%s/%d", where, kw, i), types)
		}
	}
	for _, kw := range []string{"not", "if", "then", "else"} {
		sub(n[kw], where+"/"+kw, types)
	}
	for _, name := range sortedKeys(props) {
		sub(props[name], where+"/properties/"+name, nil)
	}
	for _, pat := range sortedKeys(pats) {
		sub(pats[pat], where+"/patternProperties/"+pat, nil)
	}
	sub(n["additionalProperties"], where+"/additionalProperties", nil)
	sub(n["propertyNames"], where+"/propertyNames", []string{"string"})
	sub(n["items"], where+"/items", nil)
	defs, _ := n["$defs"].(map[string]any)
	for _, name := range sortedKeys(defs) {
		sub(defs[name], where+"/$defs/"+name, nil)
	}
	return out
}
