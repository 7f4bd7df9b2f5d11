package events

// The JSON Schemas of docs/schemas are usable as they are by the validators producers use:
// their patterns mean the same to ECMA-262 (the regular expressions of JSON Schema, and of
// Ajv), Go's regexp (RE2) and Python's re (Python's jsonschema): no \d, \w, \s or \b (Python
// reads them as Unicode classes), no lookaround (RE2 has none), and every pattern anchored
// with $, which Python's re also matches before a newline that ends the string, beside a
// rule that refuses control characters, the newline among them (controlPattern);
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
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaKeywords are the keywords the schemas may use (JSON Schema 2020-12), each with the
// JSON type it applies to ("" for any: applicators, annotations, enum and const).
var schemaKeywords = map[string]string{
	"$schema": "", "$id": "", "$ref": "", "$defs": "", "title": "", "description": "",
	"type": "", "const": "", "enum": "", "anyOf": "", "allOf": "", "oneOf": "", "not": "",
	"if": "", "then": "", "else": "",
	"properties": "object", "patternProperties": "object", "required": "object", "additionalProperties": "object", "propertyNames": "object",
	"items": "array", "minItems": "array", "maxItems": "array", "uniqueItems": "array",
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

// controlPattern finds a control character (Unicode's Cc: U+0000 to U+001F, U+007F to
// U+009F), in every regular-expression engine alike.
const controlPattern = `[\x00-\x1f\x7f-\x9f]`

func TestSchemasAreStrict(t *testing.T) {
	for _, name := range schemaFileNames(t) {
		t.Run(name, func(t *testing.T) {
			doc := rawSchema(t, name)
			if got, want := doc["$id"], schemaBaseURI+name; got != want {
				t.Errorf("$id %v, want %s", got, want)
			}
			for _, problem := range lintSchema(doc, "#", lintContext{root: true}) {
				t.Error(problem)
			}
		})
	}
}

// anchors returns the offsets of the $ of pattern that are anchors (not escaped, not in
// a character class).
func anchors(pattern string) []int {
	var out []int
	inClass := false
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '$' && !inClass:
			out = append(out, i)
		}
	}
	return out
}

// pythonRegexp compiles pattern as Python's re reads it, where it differs from ECMA-262
// in what the schemas may use: $ matches at the end, and before a newline that ends the
// string. A schema set that reads its patterns so shows what Python's jsonschema decides.
func pythonRegexp(pattern string) (jsonschema.Regexp, error) {
	var b strings.Builder
	last := 0
	for _, i := range anchors(pattern) {
		b.WriteString(pattern[last:i])
		b.WriteString(`(?:\n?\z)`)
		last = i + 1
	}
	b.WriteString(pattern[last:])
	return regexp.Compile(b.String())
}

// patternProblem says why a pattern would not mean the same in every engine, or "".
func patternProblem(pattern string) string {
	for _, look := range []string{"(?=", "(?!", "(?<"} {
		if strings.Contains(pattern, look) {
			return "a lookaround (" + look + "…): RE2 has none"
		}
	}
	for i := 0; i < len(pattern)-1; i++ {
		if pattern[i] != '\\' {
			continue
		}
		i++
		if c := pattern[i]; strings.IndexByte("dDwWsSbBpPuzZA", c) >= 0 {
			return fmt.Sprintf(`\%c: engines read it differently (Python: Unicode classes; ECMA-262: \u, \p only with the u flag)`, c)
		}
	}
	return ""
}

// The Python reading of patterns differs where it should, and the lint of patterns finds
// what it is meant to find.
func TestPatternReadings(t *testing.T) {
	py, err := pythonRegexp(`^[a-z]+$|^x$`)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]bool{"abc": true, "abc\n": true, "abc\n\n": false, "x\n": true, "a\nb": false, "[$]": false} {
		if got := py.MatchString(in); got != want {
			t.Errorf("Python's reading of %s on %q: %v, want %v", py, in, got, want)
		}
	}
	if got := anchors(`^a\$[$]$`); !slices.Equal(got, []int{7}) {
		t.Errorf("anchors = %v, want [7]", got)
	}
	for pattern, want := range map[string]string{
		`^[0-9]+$`: "", `[^\x00-\x1f]`: "", `^a(?=b)`: "a lookaround ((?=…): RE2 has none",
		`^\d+`: `\d: engines read it differently (Python: Unicode classes; ECMA-262: \u, \p only with the u flag)`,
	} {
		if got := patternProblem(pattern); got != want {
			t.Errorf("patternProblem(%q) = %q, want %q", pattern, got, want)
		}
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
		{"a $ pattern without the control rule", map[string]any{"type": "string", "pattern": "^a$"},
			[]string{`#: pattern "^a$" is anchored with $ without a rule refusing control characters beside it ("not": {"pattern": "` + controlPattern + `"}): Python's re would take a trailing newline`}},
		{"a $ pattern with the control rule of a parent", map[string]any{"type": "string", "not": map[string]any{"pattern": controlPattern},
			"anyOf": []any{map[string]any{"pattern": "^a$"}}}, nil},
		{"a $ pattern with the control rule among others", map[string]any{"type": "string", "pattern": "^a$",
			"not": map[string]any{"anyOf": []any{map[string]any{"pattern": "b"}, map[string]any{"pattern": controlPattern}}}}, nil},
		{"a pattern with \\s", map[string]any{"type": "string", "pattern": `\s`},
			[]string{`#: pattern "\\s": \s: engines read it differently (Python: Unicode classes; ECMA-262: \u, \p only with the u flag)`}},
		{"nested $id", map[string]any{"$defs": map[string]any{"x": map[string]any{"$id": "y"}}},
			[]string{`#/$defs/x: "$id" below the root`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lintSchema(tc.schema, "#", lintContext{root: true}); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// lintContext is what a schema's lint knows from where the schema is.
type lintContext struct {
	root bool // the schema is a document's root
	// types in force for its instance, and whether control characters are refused (by a
	// parent whose applicator leads here: anyOf, allOf, oneOf, not, if, then, else).
	types      []string
	controlled bool
}

// refusesControls reports whether n refuses control characters: "not" of controlPattern,
// alone or among the anyOf of its "not", or so in one of its allOf.
func refusesControls(n map[string]any) bool {
	not, _ := n["not"].(map[string]any)
	if not["pattern"] == controlPattern {
		return true
	}
	anyOf, _ := not["anyOf"].([]any)
	for _, b := range anyOf {
		if m, ok := b.(map[string]any); ok && m["pattern"] == controlPattern {
			return true
		}
	}
	allOf, _ := n["allOf"].([]any)
	for _, b := range allOf {
		if m, ok := b.(map[string]any); ok && refusesControls(m) {
			return true
		}
	}
	return false
}

// lintSchema returns the problems of the schema n at where.
func lintSchema(n map[string]any, where string, ctx lintContext) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, where+": "+fmt.Sprintf(format, args...)) }
	root, types := ctx.root, ctx.types
	controlled := ctx.controlled || refusesControls(n)
	if pattern, ok := n["pattern"].(string); ok {
		if p := patternProblem(pattern); p != "" {
			add("pattern %q: %s", pattern, p)
		}
		if len(anchors(pattern)) > 0 && !controlled {
			add(`pattern %q is anchored with $ without a rule refusing control characters beside it ("not": {"pattern": "%s"}): Python's re would take a trailing newline`, pattern, controlPattern)
		}
	}
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
	inPlace := lintContext{types: types, controlled: controlled}
	sub := func(v any, at string, ctx lintContext) {
		if m, ok := v.(map[string]any); ok {
			out = append(out, lintSchema(m, at, ctx)...)
		}
	}
	for _, kw := range []string{"anyOf", "allOf", "oneOf"} {
		list, _ := n[kw].([]any)
		for i, v := range list {
			sub(v, fmt.Sprintf("%s/%s/%d", where, kw, i), inPlace)
		}
	}
	for _, kw := range []string{"not", "if", "then", "else"} {
		sub(n[kw], where+"/"+kw, inPlace)
	}
	for _, name := range sortedKeys(props) {
		sub(props[name], where+"/properties/"+name, lintContext{})
	}
	for _, pat := range sortedKeys(pats) {
		if p := patternProblem(pat); p != "" {
			add("patternProperties %q: %s", pat, p)
		}
		if len(anchors(pat)) > 0 {
			add("patternProperties %q is anchored with $: Python's re would take a name with a trailing newline (use propertyNames)", pat)
		}
		sub(pats[pat], where+"/patternProperties/"+pat, lintContext{})
	}
	sub(n["additionalProperties"], where+"/additionalProperties", lintContext{})
	sub(n["propertyNames"], where+"/propertyNames", lintContext{types: []string{"string"}})
	sub(n["items"], where+"/items", lintContext{})
	defs, _ := n["$defs"].(map[string]any)
	for _, name := range sortedKeys(defs) {
		sub(defs[name], where+"/$defs/"+name, lintContext{})
	}
	return out
}
