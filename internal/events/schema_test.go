package events

// The machine-readable contract (docs/asyncapi.yaml and the JSON Schemas of docs/schemas)
// kept true: every JSON example of the docs validates against its schema and decodes; the
// schemas name exactly the fields of the Go types; and the schemas agree with the decoder,
// format assertion on and patterns read as ECMA-262 and as Python's re read them: an event
// a schema rejects, Decode rejects too (so a producer that validates against the schemas
// never holds back an event the workers would take), and an event Decode rejects, the
// schema rejects too, but for the rules no schema can state (schemaBlindRules, each listed
// in docs/contract.md). The tables below hold events at every limit, of every kind
// (numbers, names, nulls, shapes, times, media types, lengths, repeated members, non-ASCII
// text); FuzzSchemaAndDecoderAgree mutates them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

func docsDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "docs")
}

// schemaBaseURI is the base of the $id of every schema of docs/schemas: the $id of
// schemas/x.json is schemaBaseURI + "x.json", and the schemas reference each other by
// relative URI ("data-broker-overloaded.json", "cloudevent.json#/$defs/timestamp").
const schemaBaseURI = "https://kafkamender.dev/schemas/"

// schemaSet compiles the schemas of docs/schemas on demand, by their path relative to
// docs/ ("schemas/result.json", "schemas/result.json#/$defs/change"), as a validator that
// was given the files would: by their $id, never fetched.
type schemaSet struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

func newSchemaSet(t testing.TB) *schemaSet {
	t.Helper()
	return newSchemaSetWith(t, nil)
}

// newSchemaSetWith is newSchemaSet whose patterns are read by engine (nil: Go's regexp,
// which reads the schemas' patterns as ECMA-262 does; see pythonRegexp).
func newSchemaSetWith(t testing.TB, engine jsonschema.RegexpEngine) *schemaSet {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time, as validators that assert formats read it
	c.UseLoader(schemaFiles{filepath.Join(docsDir(t), "schemas")})
	if engine != nil {
		c.UseRegexpEngine(engine)
	}
	return &schemaSet{compiler: c, compiled: map[string]*jsonschema.Schema{}}
}

// schemaFiles loads the URIs under schemaBaseURI from the files of dir, and no other.
type schemaFiles struct{ dir string }

func (l schemaFiles) Load(url string) (any, error) {
	name, ok := strings.CutPrefix(url, schemaBaseURI)
	if !ok || name == "" || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("not loading %s: not a schema of docs/schemas (%s<file>)", url, schemaBaseURI)
	}
	f, err := os.Open(filepath.Join(l.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}

func (s *schemaSet) get(t testing.TB, ref string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[ref]; ok {
		return sch
	}
	loc, ok := strings.CutPrefix(ref, "schemas/")
	if !ok {
		t.Fatalf("schema %s: not under schemas/", ref)
	}
	sch, err := s.compiler.Compile(schemaBaseURI + loc)
	if err != nil {
		t.Fatalf("compile %s: %v", ref, err)
	}
	s.compiled[ref] = sch
	return sch
}

// validate checks the JSON document raw against the schema ref; a document that is not
// JSON is an error too.
func (s *schemaSet) validate(t testing.TB, ref string, raw []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.get(t, ref).Validate(v)
}

func eventSchema(typ string) string { return "schemas/event-" + typ + ".json" }
func dataSchema(typ string) string  { return "schemas/data-" + typ + ".json" }

const (
	resultSchema            = "schemas/result.json"
	changeSchema            = "schemas/result.json#/$defs/change"
	progressSchema          = "schemas/progress.json"
	deadLetterSchema        = "schemas/dead-letter.json"
	deadLetterHeadersSchema = "schemas/dead-letter-headers.json"
	eventHeadersSchema      = "schemas/event-headers.json"
)

var schemaDecodeOptions = DecodeOptions{Clusters: []string{"local"}}

// A docExample is one fenced ```json block of a Markdown file of docs/.
type docExample struct {
	file string // relative to docs/
	line int    // of the opening fence
	body string
}

func (e docExample) String() string { return fmt.Sprintf("docs/%s:%d", e.file, e.line) }

var jsonFence = regexp.MustCompile("(?m)^```json[ \t]*\n")

func docExamples(t testing.TB) []docExample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docsDir(t), "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	var out []docExample
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, loc := range jsonFence.FindAllStringIndex(text, -1) {
			rest := text[loc[1]:]
			end := strings.Index(rest, "\n```")
			if end < 0 {
				t.Fatalf("docs/%s: unterminated ```json block", filepath.Base(path))
			}
			out = append(out, docExample{
				file: filepath.Base(path),
				line: strings.Count(text[:loc[0]], "\n") + 1,
				body: rest[:end+1],
			})
		}
	}
	return out
}

// The kinds of JSON example in the docs.
const (
	kindEvent    = "event"
	kindResult   = "result"
	kindChange   = "change" // one element of a result's changes
	kindProgress = "progress"
)

// skippedExamples are the JSON examples of docs/ that are no message of the NATS contract,
// each with the reason; a key is the file and a string only that example contains.
var skippedExamples = map[[2]string]string{
	{"alertmanager.md", `"published":`}: "the HTTP response of the worker's Alertmanager webhook, not a NATS message",
}

// classify says what a JSON example of the docs is, by the members it has.
func classify(body string) string {
	var members map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &members) != nil {
		return ""
	}
	has := func(name string) bool { _, ok := members[name]; return ok }
	switch {
	case has("specversion"):
		return kindEvent
	case has("status") && has("worker"):
		return kindResult
	case has("partitions_total"):
		return kindProgress
	case has("replicas_before") && has("leader_after"):
		return kindChange
	}
	return ""
}

// Every JSON example of docs/*.md is a message of the contract that validates against its
// schema and that the Go side reads (events: Decode; results: strictly into Result), or is
// skipped on purpose with a reason.
func TestDocExamplesMatchSchemas(t *testing.T) {
	s := newSchemaSet(t)
	examples := docExamples(t)
	skipsUsed := map[[2]string]int{}
	kinds := map[string]int{}
	for _, ex := range examples {
		t.Run(ex.String(), func(t *testing.T) {
			for key, reason := range skippedExamples {
				if key[0] == ex.file && strings.Contains(ex.body, key[1]) {
					skipsUsed[key]++
					t.Skipf("not a message of the contract: %s", reason)
				}
			}
			kind := classify(ex.body)
			kinds[kind]++
			checkExample(t, s, kind, []byte(ex.body))
		})
	}
	for key := range skippedExamples {
		if skipsUsed[key] != 1 {
			t.Errorf("skipped example %q of docs/%s matched %d examples, want 1", key[1], key[0], skipsUsed[key])
		}
	}
	// The contract shows an example of each (a guard against the extraction finding nothing).
	for _, kind := range []string{kindEvent, kindResult, kindChange, kindProgress} {
		if kinds[kind] == 0 {
			t.Errorf("no %s example found in docs/*.md", kind)
		}
	}
}

// checkExample validates a JSON example of the given kind against its schema and reads it
// as the Go side does.
func checkExample(t *testing.T, s *schemaSet, kind string, body []byte) {
	t.Helper()
	switch kind {
	case kindEvent:
		var head struct{ Type string }
		if err := json.Unmarshal(body, &head); err != nil || !KnownType(head.Type) {
			t.Fatalf("event of unknown type %q (%v):\n%s", head.Type, err, body)
		}
		if err := s.validate(t, eventSchema(head.Type), body); err != nil {
			t.Errorf("schema rejects the example: %v\n%s", err, body)
		}
		if _, err := Decode(Subject("local", head.Type), nil, body, schemaDecodeOptions); err != nil {
			t.Errorf("Decode rejects the example: %v\n%s", err, body)
		}
	case kindResult:
		if err := s.validate(t, resultSchema, body); err != nil {
			t.Errorf("schema rejects the example: %v\n%s", err, body)
		}
		var res Result
		if err := decodeStrict(body, &res); err != nil {
			t.Errorf("the example is no Result: %v\n%s", err, body)
		}
	case kindChange:
		if err := s.validate(t, changeSchema, body); err != nil {
			t.Errorf("schema rejects the example: %v\n%s", err, body)
		}
		var ch Change
		if err := decodeStrict(body, &ch); err != nil {
			t.Errorf("the example is no Change: %v\n%s", err, body)
		}
	case kindProgress:
		if err := s.validate(t, progressSchema, body); err != nil {
			t.Errorf("schema rejects the example: %v\n%s", err, body)
		}
	default:
		t.Fatalf("unclassified JSON example: make it an event, result, change or progress report, or add it to skippedExamples with the reason:\n%s", body)
	}
}

// decodeStrict decodes raw into v, refusing members v has no field for, and members that
// name a field in another case.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	back, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// Every member name of raw must come back (omitted zero values aside) exactly.
	return sameNames(raw, back)
}

// sameNames reports a member name of raw (at any depth) that the re-encoded back lacks,
// other than those back leaves out for being empty.
func sameNames(raw, back []byte) error {
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(back, &b); err != nil {
		return err
	}
	var walk func(path string, a, b any) error
	walk = func(path string, a, b any) error {
		switch a := a.(type) {
		case map[string]any:
			bm, _ := b.(map[string]any)
			for k, av := range a {
				bv, ok := bm[k]
				if !ok {
					if isEmpty(av) {
						continue
					}
					return fmt.Errorf("%s.%s: no such field (names are case-sensitive)", path, k)
				}
				if err := walk(path+"."+k, av, bv); err != nil {
					return err
				}
			}
		case []any:
			bs, _ := b.([]any)
			for i := range min(len(a), len(bs)) {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), a[i], bs[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("", a, b)
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// toJSON encodes v (Go values, or YAML data) as JSON.
func toJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rawSchema reads a schema file of docs/schemas as plain JSON.
func rawSchema(t testing.TB, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(docsDir(t), "schemas", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("schemas/%s: %v", name, err)
	}
	return m
}

// schemaNode returns the object at the JSON pointer ptr ("/$defs/change") of a schema.
func schemaNode(t testing.TB, doc map[string]any, ptr string) map[string]any {
	t.Helper()
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		next, ok := cur[strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)].(map[string]any)
		if !ok {
			t.Fatalf("no object at %s", ptr)
		}
		cur = next
	}
	return cur
}

// deref follows a local "$ref" ("#/$defs/x") of a schema node within doc.
func deref(t testing.TB, doc, n map[string]any) map[string]any {
	t.Helper()
	if ref, ok := n["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
		return schemaNode(t, doc, ref[1:])
	}
	return n
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func stringList(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = []string{v}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// jsonFields lists the JSON names of a struct type's fields (embedded structs flattened)
// and those it always writes (no omitempty or omitzero).
func jsonFields(t reflect.Type) (names, always []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			n, a := jsonFields(f.Type)
			names, always = append(names, n...), append(always, a...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	slices.Sort(names)
	slices.Sort(always)
	return names, always
}

// checkObjectSchema compares the properties and required members of the object schema n
// with the JSON fields of the Go type typ.
func checkObjectSchema(t *testing.T, where string, n map[string]any, typ reflect.Type) {
	t.Helper()
	names, always := jsonFields(typ)
	props, _ := n["properties"].(map[string]any)
	if got := sortedKeys(props); !slices.Equal(got, names) {
		t.Errorf("%s: properties %v, want the fields of %s: %v", where, got, typ, names)
	}
	if got := stringList(n["required"]); !slices.Equal(got, always) {
		t.Errorf("%s: required %v, want the fields %s always has: %v", where, got, typ, always)
	}
}

// schemaTypes is the JSON Schema type (and that of the items of an array) of each kind of
// data field.
var schemaTypes = map[FieldKind]struct{ typ, items string }{
	"string": {"string", ""}, "integer": {"integer", ""}, "boolean": {"boolean", ""}, "duration": {"string", ""},
	"[]string": {"array", "string"}, "[]integer": {"array", "integer"},
}

// The data schemas name exactly the fields of the payload structs, require those without
// omitempty (the decoder's required fields), and type them as the structs do.
func TestDataSchemasMatchPayloadStructs(t *testing.T) {
	for _, ti := range Types() {
		t.Run(ti.Name, func(t *testing.T) {
			doc := rawSchema(t, "data-"+ti.Name+".json")
			checkObjectSchema(t, "data-"+ti.Name+".json", doc, payloadType(ti.Name))
			if doc["additionalProperties"] != false {
				t.Error("additionalProperties must be false: the decoder rejects unknown fields")
			}
			props, _ := doc["properties"].(map[string]any)
			for name, p := range props {
				kind, ok := DataField(ti.Name, name)
				if !ok {
					continue // reported above
				}
				file := "data-" + ti.Name + ".json"
				want := schemaTypes[kind]
				if types := jsonTypesOf(t, file, p.(map[string]any)); !slices.Contains(types, want.typ) {
					t.Errorf("%s: type %v, want %s (Go kind %s)", name, types, want.typ, kind)
				}
				if want.items != "" {
					it, _ := deref(t, doc, p.(map[string]any))["items"].(map[string]any)
					if types := jsonTypesOf(t, file, it); !slices.Contains(types, want.items) {
						t.Errorf("%s: items of type %v, want %s", name, types, want.items)
					}
				}
			}
		})
	}
}

// jsonTypesOf returns the JSON types that the schema n of docs/schemas/file admits, as its
// "type", "const", "enum", "anyOf" and "$ref" (within the file or to another) say.
func jsonTypesOf(t testing.TB, file string, n map[string]any) []string {
	t.Helper()
	if ty, ok := n["type"]; ok {
		return stringList(ty)
	}
	var out []string
	add := func(types ...string) {
		for _, ty := range types {
			if !slices.Contains(out, ty) {
				out = append(out, ty)
			}
		}
	}
	valueType := func(v any) string {
		switch v.(type) {
		case nil:
			return "null"
		case string:
			return "string"
		case bool:
			return "boolean"
		case float64:
			return "number"
		}
		return "object"
	}
	if c, ok := n["const"]; ok {
		add(valueType(c))
	}
	enum, _ := n["enum"].([]any)
	for _, e := range enum {
		add(valueType(e))
	}
	branches, _ := n["anyOf"].([]any)
	for _, b := range branches {
		if m, ok := b.(map[string]any); ok {
			add(jsonTypesOf(t, file, m)...)
		}
	}
	if ref, ok := n["$ref"].(string); ok {
		target, ptr, _ := strings.Cut(ref, "#")
		if target == "" {
			target = file
		}
		add(jsonTypesOf(t, target, schemaNode(t, rawSchema(t, target), ptr))...)
	}
	slices.Sort(out)
	return out
}

// Every event type has its event and data schema, and the envelope schema names exactly
// the attributes of Envelope (plus those the decoder reads and drops).
func TestEnvelopeSchemaMatchesEnvelope(t *testing.T) {
	doc := rawSchema(t, "cloudevent.json")
	names, _ := jsonFields(reflect.TypeFor[Envelope]())
	props := sortedKeys(doc["properties"].(map[string]any))
	want := append(slices.Clone(names), "subject", "dataschema", "data_base64") // read by setAttr
	slices.Sort(want)
	if !slices.Equal(props, want) {
		t.Errorf("cloudevent.json properties %v, want %v", props, want)
	}
	if got, want := stringList(doc["required"]), []string{"data", "id", "source", "specversion", "type"}; !slices.Equal(got, want) {
		t.Errorf("cloudevent.json required %v, want %v", got, want)
	}
	var types []string
	for _, ti := range Types() {
		types = append(types, ti.Name)
		for _, f := range []string{"event-" + ti.Name + ".json", "data-" + ti.Name + ".json"} {
			if _, err := os.Stat(filepath.Join(docsDir(t), "schemas", f)); err != nil {
				t.Errorf("event type %s has no schemas/%s", ti.Name, f)
			}
		}
		evSchema := rawSchema(t, "event-"+ti.Name+".json")
		if got := schemaNode(t, evSchema, "/properties/type")["const"]; got != ti.Name {
			t.Errorf("event-%s.json: type const %v", ti.Name, got)
		}
	}
	slices.Sort(types)
	if got := stringList(schemaNode(t, doc, "/properties/type")["enum"]); !slices.Equal(got, types) {
		t.Errorf("cloudevent.json: type enum %v, want the types %v", got, types)
	}
	if got := schemaNode(t, doc, "/properties/specversion")["const"]; got != SpecVersion {
		t.Errorf("cloudevent.json: specversion %v, want %s", got, SpecVersion)
	}
}

// The result schema names exactly the fields of Result and of its lists' types, requires
// what Result always writes, and lists exactly the statuses and skip codes of the code and
// of docs/contract.md.
func TestResultSchemaMatchesResult(t *testing.T) {
	doc := rawSchema(t, "result.json")
	checkObjectSchema(t, "result.json", doc, reflect.TypeFor[Result]())
	for ptr, typ := range map[string]reflect.Type{
		"/$defs/change":         reflect.TypeFor[Change](),
		"/$defs/skip":           reflect.TypeFor[Skip](),
		"/$defs/topicPartition": reflect.TypeFor[TopicPartition](),
		"/$defs/keptThrottle":   reflect.TypeFor[KeptThrottle](),
		"/$defs/truncated":      reflect.TypeFor[Truncated](),
		"/$defs/offsetRange":    reflect.TypeFor[OffsetRange](),
	} {
		checkObjectSchema(t, "result.json#"+ptr, schemaNode(t, doc, ptr), typ)
	}

	contract, err := os.ReadFile(filepath.Join(docsDir(t), "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	statuses := stringConstants(t, []string{"."}, "Status")
	if got := stringList(schemaNode(t, doc, "/properties/status")["enum"]); !slices.Equal(got, statuses) {
		t.Errorf("result.json: status enum %v, want the Status constants %v", got, statuses)
	}
	_, table, ok := strings.Cut(string(contract), "| `status` | meaning |")
	if !ok {
		t.Fatal("docs/contract.md has no status table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(table, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if !slices.Equal(documented, statuses) {
		t.Errorf("docs/contract.md lists the statuses %v, want %v", documented, statuses)
	}

	codes := stringConstants(t, []string{"../plan", "../handlers"}, "SkipCode")
	if got := stringList(schemaNode(t, doc, "/$defs/skip/properties/code")["enum"]); !slices.Equal(got, codes) {
		t.Errorf("result.json: skip code enum %v, want the SkipCode constants of packages plan and handlers %v", got, codes)
	}
	para, ok := strings.CutPrefix(string(contract[bytes.Index(contract, []byte("Skip codes:")):]), "Skip codes:")
	if !ok {
		t.Fatal(`docs/contract.md has no "Skip codes:"`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if !slices.Equal(listed, codes) {
		t.Errorf("docs/contract.md lists the skip codes %v, want %v", listed, codes)
	}
	metricsDoc, err := os.ReadFile(filepath.Join(docsDir(t), "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `kafkamender_partitions_skipped_total` \\|.*?\\(([^;\\n]*);").FindSubmatch(metricsDoc)
	if row == nil {
		t.Fatal("docs/metrics.md has no row for kafkamender_partitions_skipped_total with its reason codes")
	}
	listed = nil
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(row[1], -1) {
		listed = append(listed, string(m[1]))
	}
	slices.Sort(listed)
	if !slices.Equal(listed, codes) {
		t.Errorf("docs/metrics.md lists the skip reasons %v, want %v", listed, codes)
	}
}

// stringConstants returns the values of the string constants of type typ (or pkg.typ)
// declared in the non-test Go files of dirs, sorted.
func stringConstants(t testing.TB, dirs []string, typ string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.ValueSpec)
				if !ok || !typeNamed(spec.Type, typ) {
					return true
				}
				for _, v := range spec.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, s)
					}
				}
				return true
			})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants of type %s in %v", typ, dirs)
	}
	slices.Sort(out)
	return out
}

func typeNamed(e ast.Expr, name string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == name
	case *ast.SelectorExpr:
		return e.Sel.Name == name
	}
	return false
}

// The progress schema names exactly the fields of Progress, which the workers publish, and
// requires those always present.
func TestProgressSchemaMatchesProgress(t *testing.T) {
	doc := rawSchema(t, "progress.json")
	fields, always := jsonFields(reflect.TypeFor[Progress]())
	if got := sortedKeys(doc["properties"].(map[string]any)); !slices.Equal(got, fields) {
		t.Errorf("progress.json properties %v, want the fields of Progress %v", got, fields)
	}
	got := stringList(doc["required"])
	slices.Sort(got)
	if !slices.Equal(got, always) {
		t.Errorf("progress.json required %v, want the fields of Progress always present %v", got, always)
	}
}

// The dead-letter headers schema names the headers of dead.go.
func TestDeadLetterHeadersSchema(t *testing.T) {
	doc := rawSchema(t, "dead-letter-headers.json")
	added := []string{HeaderOriginalSubject, HeaderStreamSequence, HeaderDeliveries, HeaderReason, HeaderEventID}
	props := doc["properties"].(map[string]any)
	for _, h := range added {
		if _, ok := props[h]; !ok {
			t.Errorf("dead-letter-headers.json lacks %s", h)
		}
	}
	want := slices.DeleteFunc(slices.Clone(added), func(h string) bool { return h == HeaderEventID }) // "when known"
	slices.Sort(want)
	if got := stringList(doc["required"]); !slices.Equal(got, want) {
		t.Errorf("dead-letter-headers.json required %v, want %v", got, want)
	}
	// The original's JetStream headers are among the other headers (a patternProperties
	// for them would overlap HeaderOriginalSubject, which Ajv's strict mode refuses).
	other, _ := doc["additionalProperties"].(map[string]any)
	if desc, _ := other["description"].(string); !strings.Contains(desc, HeaderOriginalPrefix+"*") {
		t.Errorf("dead-letter-headers.json: additionalProperties does not describe the headers %s*: %q", HeaderOriginalPrefix, desc)
	}
}

// What the workers publish validates: results as they are stored (complete fills the
// lists), progress reports, dead-letter headers.
func TestGoValuesValidate(t *testing.T) {
	s := newSchemaSet(t)
	b := int32(1)
	before := "100"
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	full := Result{
		ID: "a1b2", Type: TypeReplicaChangeRequested, Cluster: "local", Status: StatusPartial, Strategy: "api",
		Attempt: 2, Worker: "host-1", StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), ControllerFailover: true,
		Changes: []Change{
			{TopicPartition: TopicPartition{"orders", 1}, ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 1, 3}, LeaderBefore: 1, LeaderAfter: 2},
			{TopicPartition: TopicPartition{"orders", 3}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2}, LeaderBefore: 1, LeaderAfter: 1,
				Broker: &b, DirBefore: "/data1", DirAfter: "/data2", Bytes: 1 << 30},
			{TopicPartition: TopicPartition{"gone", 0}, LeaderBefore: -1, LeaderAfter: -1},
		},
		Skipped:       []Skip{{TopicPartition{"orders", 4}, "no in-sync replica other than broker 1", "no_in_sync_candidate"}, {TopicPartition{"orders", 5}, "why", ""}},
		Noop:          []TopicPartition{{"orders", 0}},
		Reason:        "r",
		Note:          "n",
		PreviousEvent: "e0",
		Replayed:      true,
		ThrottlesKept: []KeptThrottle{{ThrottleKey{"broker", "1", "leader.replication.throttled.rate", &before, "200"}, nil}},
	}
	stored := Result{ID: "x", Type: TypeBrokerOverloaded, Cluster: "local", Status: StatusRejected, Error: "data.broker: required",
		StartedAt: start, FinishedAt: start, Changes: []Change{}, Skipped: []Skip{}}
	// The head of a result too large for one message.
	head := full
	head.Truncated = &Truncated{Changes: 3, Skipped: 2, Noop: 1, Parts: 2, Size: 1 << 21,
		SHA256: strings.Repeat("0a", 32), Subject: ResultPartsSubject("a1b2", "NONCE")}
	for name, v := range map[string]any{"full result": full, "rejected result": stored, "head": head} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.validate(t, resultSchema, raw); err != nil {
			t.Errorf("%s: %v\n%s", name, err, raw)
		}
	}
	progress := `{"id":"a1b2","batch":1,"batches":1,"partitions_done":0,"partitions_total":3,"bytes_copied":0,"bytes_expected":0}`
	if err := s.validate(t, progressSchema, []byte(progress)); err != nil {
		t.Errorf("progress: %v", err)
	}
	headers := map[string]string{
		HeaderOriginalSubject: Subject("local", TypeBrokerOverloaded), HeaderStreamSequence: "17", HeaderDeliveries: "5",
		HeaderReason: "delivered 5 times", HeaderOriginalPrefix + "Msg-Id": "a1b2", "Nats-Msg-Id": "dead-17", "X-Trace": "t",
	}
	if err := s.validate(t, deadLetterHeadersSchema, toJSON(t, headers)); err != nil {
		t.Errorf("dead-letter headers: %v", err)
	}
	delete(headers, HeaderReason)
	if err := s.validate(t, deadLetterHeadersSchema, toJSON(t, headers)); err == nil {
		t.Errorf("dead-letter headers without %s validate", HeaderReason)
	}
}

// mkEvent builds a structured-mode event of type typ with data, and more attributes (each
// `"name":value`, or `-name` to leave out a default attribute).
func mkEvent(typ, data string, attrs ...string) string {
	def := []string{`"specversion":"1.0"`, `"id":"a1b2"`, `"source":"test"`, `"type":"` + typ + `"`}
	var out []string
	for _, a := range def {
		name, _, _ := strings.Cut(a, ":")
		if slices.Contains(attrs, "-"+strings.Trim(name, `"`)) || slices.ContainsFunc(attrs, func(x string) bool { return strings.HasPrefix(x, name+":") }) {
			continue
		}
		out = append(out, a)
	}
	for _, a := range attrs {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	if data != "" {
		out = append(out, `"data":`+data)
	}
	return "{" + strings.Join(out, ",") + "}"
}

// short is body for a message: at most 300 bytes of it.
func short[T string | []byte | json.RawMessage](body T) string {
	if len(body) > 300 {
		return string(body[:300]) + fmt.Sprintf("… (%d bytes)", len(body))
	}
	return string(body)
}

// repeatJSON is n copies of the JSON value v, separated by commas.
func repeatJSON(v string, n int) string {
	return strings.TrimSuffix(strings.Repeat(v+",", n), ",")
}

const (
	tBO = TypeBrokerOverloaded
	tRC = TypeReplicaChangeRequested
	tLD = TypeLogDirMoveRequested
	tBF = TypeBrokerFailed
	tBD = TypeBrokerDrain
	tBA = TypeBrokerAdded
	tPO = TypePartitionOffline
	tCP = TypeClusterPause
	tCR = TypeClusterResume
	tOC = TypeOperationCancel
)

// schemaCase is an event and its type (the subject's).
type schemaCase struct {
	name, typ, body string
}

// invalidEvents are events the schemas must reject, and the decoder too.
var invalidEvents = []schemaCase{
	// The body and the envelope.
	{"body an array", tBO, `[{"broker":1}]`},
	{"body not JSON", tBO, `{"specversion":"1.0",`},
	{"no specversion", tBO, mkEvent(tBO, `{"broker":1}`, "-specversion")},
	{"specversion 0.3", tBO, mkEvent(tBO, `{"broker":1}`, `"specversion":"0.3"`)},
	{"specversion a number", tBO, mkEvent(tBO, `{"broker":1}`, `"specversion":1.0`)},
	{"no id", tBO, mkEvent(tBO, `{"broker":1}`, "-id")},
	{"empty id", tBO, mkEvent(tBO, `{"broker":1}`, `"id":""`)},
	{"null id", tBO, mkEvent(tBO, `{"broker":1}`, `"id":null`)},
	{"id with a dot", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"a.b"`)},
	{"id with a space", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"a b"`)},
	{"id with a wildcard", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"a*"`)},
	{"id not ASCII", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"ü"`)},
	{"id a number", tBO, mkEvent(tBO, `{"broker":1}`, `"id":12`)},
	{"id over 128 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"`+strings.Repeat("i", MaxIDLength+1)+`"`)},
	{"id with a trailing newline", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"a1b2\n"`)},
	{"no source", tBO, mkEvent(tBO, `{"broker":1}`, "-source")},
	{"empty source", tBO, mkEvent(tBO, `{"broker":1}`, `"source":""`)},
	{"null source", tBO, mkEvent(tBO, `{"broker":1}`, `"source":null`)},
	{"no type", tBO, mkEvent(tBO, `{"broker":1}`, "-type")},
	{"unknown type", tBO, mkEvent(tBO, `{"broker":1}`, `"type":"reboot"`)},
	{"type not the subject's", tBO, mkEvent(tRC, `{"topic":"o","preferred_leader":1}`)},
	{"time not a time", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"tomorrow"`)},
	{"time without zone", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00"`)},
	{"time with a space", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29 10:00:00Z"`)},
	{"time a number", tBO, mkEvent(tBO, `{"broker":1}`, `"time":1796180400`)},
	{"time null", tBO, mkEvent(tBO, `{"broker":1}`, `"time":null`)},
	{"time with a one-digit hour", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T9:00:00Z"`)},
	{"time with a comma before the fraction", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00,5Z"`)},
	{"time with an empty fraction", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00.Z"`)},
	{"time with a fraction of 10 digits", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00.1234567891Z"`)},
	{"time with offset minute 60", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00+01:60"`)},
	{"time with offset hour 24", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00+24:00"`)},
	{"time with an offset without colon", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00+0100"`)},
	{"time with hour 24", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T24:00:00Z"`)},
	{"time with minute 60", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:60:00Z"`)},
	{"time with a leap second", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2016-12-31T23:59:60Z"`)},
	{"time on February 29 of a common year", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-02-29T10:00:00Z"`)},
	{"time on February 29 of 1900", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"1900-02-29T10:00:00Z"`)},
	{"time on April 31", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-04-31T10:00:00Z"`)},
	{"time in month 13", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-13-01T10:00:00Z"`)},
	{"time on day 0", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-00T10:00:00Z"`)},
	{"time with a signed hour", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T+1:00:00Z"`)},
	{"time with a five-digit year", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"12026-11-29T10:00:00Z"`)},
	{"time without seconds", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00Z"`)},
	{"time with Arabic-Indic digits", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T١٠:00:00Z"`)},
	{"time with fullwidth digits", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"２026-11-29T10:00:00Z"`)},
	{"time with a trailing newline", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00Z\n"`)},
	{"time with a trailing space", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00Z "`)},
	{"time with a lower-case zone name", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00utc"`)},
	{"expiresat not a time", tBO, mkEvent(tBO, `{"broker":1}`, `"expiresat":"in 5m"`)},
	{"expiresat with offset minute 60", tBO, mkEvent(tBO, `{"broker":1}`, `"expiresat":"2026-11-29T10:00:00-05:60"`)},
	{"expiresat null", tBO, mkEvent(tBO, `{"broker":1}`, `"expiresat":null`)},
	{"datacontenttype text", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"text/plain"`)},
	{"datacontenttype a number", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":1`)},
	{"datacontenttype with a dotted capital I", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"APPL\u0130CATION/JSON"`)},
	{"datacontenttype with a Kelvin sign", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; \u212a=v"`)},
	{"datacontenttype with a non-breaking space", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"\u00a0application/json"`)},
	{"datacontenttype with a non-ASCII parameter", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; charset=\u00fc"`)},
	{"datacontenttype with a non-ASCII quoted parameter", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; charset=\"\u00fc\""`)},
	{"datacontenttype with a tab", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json\t"`)},
	{"datacontenttype with a newline", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json\n"`)},
	{"datacontenttype misspelt", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/jsn"`)},
	{"datacontenttype with a prefix", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"xapplication/json"`)},
	{"datacontenttype with a suffix", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json+x"`)},
	{"datacontenttype cloudevents", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/cloudevents+json"`)},
	{"datacontenttype parameter without value", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; charset"`)},
	{"datacontenttype parameter with spaces around =", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; charset = utf-8"`)},
	{"datacontenttype unclosed quote", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json; a=\"b"`)},
	{"subject a number", tBO, mkEvent(tBO, `{"broker":1}`, `"subject":1`)},
	{"dataschema a boolean", tBO, mkEvent(tBO, `{"broker":1}`, `"dataschema":true`)},
	{"no data", tBO, mkEvent(tBO, "")},
	{"data null", tBO, mkEvent(tBO, `null`)},
	{"data an array", tBO, mkEvent(tBO, `[1]`)},
	{"data a string", tBO, mkEvent(tBO, `"{\"broker\":1}"`)},
	{"data_base64", tBO, mkEvent(tBO, `{"broker":1}`, `"data_base64":"eA=="`)},
	{"extension with upper case", tBO, mkEvent(tBO, `{"broker":1}`, `"Trace":"x"`)},
	{"extension with underscore", tBO, mkEvent(tBO, `{"broker":1}`, `"trace_id":"x"`)},
	{"extension an object", tBO, mkEvent(tBO, `{"broker":1}`, `"o":{"x":[1]}`)},
	{"extension a list", tBO, mkEvent(tBO, `{"broker":1}`, `"l":["a"]`)},
	{"extension a fraction", tBO, mkEvent(tBO, `{"broker":1}`, `"f":1.5`)},
	{"extension beyond 32 bits", tBO, mkEvent(tBO, `{"broker":1}`, `"i":2147483648`)},
	{"extension below 32 bits", tBO, mkEvent(tBO, `{"broker":1}`, `"i":-2147483649`)},
	{"extension over 1024 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"x":"`+strings.Repeat("x", MaxTextLength+1)+`"`)},
	{"extension with a newline", tBO, mkEvent(tBO, `{"broker":1}`, `"x":"a\nb"`)},
	{"source over 1024 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"`+strings.Repeat("\u00e9", MaxTextLength+1)+`"`)},
	{"source with a newline", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"alertmanager\nprod"`)},
	{"source with a C1 control character", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"a\u0085b"`)},
	{"source with DEL", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"a\u007f"`)},
	{"subject with a tab", tBO, mkEvent(tBO, `{"broker":1}`, `"subject":"a\tb"`)},
	{"dataschema over 1024 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"dataschema":"`+strings.Repeat("d", MaxTextLength+1)+`"`)},
	{"bo: reason over 1024 characters", tBO, mkEvent(tBO, `{"broker":1,"reason":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},
	{"rc: reason with a newline", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"reason":"a\nb"}`)},
	{"ld: reason with a NUL", tLD, mkEvent(tLD, `{"broker":1,"reason":"a\u0000"}`)},
	{"extension name too long", tBO, mkEvent(tBO, `{"broker":1}`, `"abcdefghijklmnopqrstu":"x"`)},
	{"attribute in another case", tBO, mkEvent(tBO, `{"broker":1}`, `"Source":"x"`)},

	// broker-overloaded data.
	{"bo: no broker", tBO, mkEvent(tBO, `{"topics":["a"]}`)},
	{"bo: null broker", tBO, mkEvent(tBO, `{"broker":null}`)},
	{"bo: negative broker", tBO, mkEvent(tBO, `{"broker":-1}`)},
	{"bo: broker a string", tBO, mkEvent(tBO, `{"broker":"2"}`)},
	{"bo: broker a fraction", tBO, mkEvent(tBO, `{"broker":2.5}`)},
	{"bo: broker a fraction by its exponent", tBO, mkEvent(tBO, `{"broker":15e-1}`)},
	{"bo: broker a tiny fraction", tBO, mkEvent(tBO, `{"broker":1.000000000000000000001}`)},
	{"bo: broker beyond int32 by its exponent", tBO, mkEvent(tBO, `{"broker":2.2e9}`)},
	{"bo: broker of a huge exponent", tBO, mkEvent(tBO, `{"broker":1e999999999}`)},
	{"bo: broker beyond int32", tBO, mkEvent(tBO, `{"broker":2147483648}`)},
	{"bo: unknown field", tBO, mkEvent(tBO, `{"broker":1,"leader":2}`)},
	{"bo: field in another case", tBO, mkEvent(tBO, `{"Broker":1}`)},
	{"bo: topics a string", tBO, mkEvent(tBO, `{"broker":1,"topics":"orders"}`)},
	{"bo: topics of numbers", tBO, mkEvent(tBO, `{"broker":1,"topics":[1]}`)},
	{"bo: exclude_topics an object", tBO, mkEvent(tBO, `{"broker":1,"exclude_topics":{}}`)},
	{"bo: negative max_partitions", tBO, mkEvent(tBO, `{"broker":1,"max_partitions":-1}`)},
	{"bo: max_partitions over 2^53-1", tBO, mkEvent(tBO, `{"broker":1,"max_partitions":9007199254740992}`)},
	{"bo: max_partitions beyond int64", tBO, mkEvent(tBO, `{"broker":1,"max_partitions":1e30}`)},
	{"bo: a null topic", tBO, mkEvent(tBO, `{"broker":1,"topics":["a",null]}`)},
	{"bo: a null excluded topic", tBO, mkEvent(tBO, `{"broker":1,"exclude_topics":[null]}`)},
	{"bo: topics over the cap", tBO, mkEvent(tBO, `{"broker":1,"topics":[`+repeatJSON(`"a"`, MaxListedTopics+1)+`]}`)},
	{"bo: exclude_topics over the cap", tBO, mkEvent(tBO, `{"broker":1,"exclude_topics":[`+repeatJSON(`"a"`, MaxListedTopics+1)+`]}`)},
	{"bo: max_partitions a string", tBO, mkEvent(tBO, `{"broker":1,"max_partitions":"5"}`)},
	{"bo: demote_to_end a string", tBO, mkEvent(tBO, `{"broker":1,"demote_to_end":"yes"}`)},
	{"bo: dry_run a number", tBO, mkEvent(tBO, `{"broker":1,"dry_run":1}`)},
	{"bo: reason a number", tBO, mkEvent(tBO, `{"broker":1,"reason":5}`)},
	{"bo: cluster a number", tBO, mkEvent(tBO, `{"broker":1,"cluster":5}`)},
	{"bo: cluster not a token", tBO, mkEvent(tBO, `{"broker":1,"cluster":"lo cal"}`)},
	{"rc: cluster over 64 characters", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"cluster":"`+strings.Repeat("c", MaxClusterNameLength+1)+`"}`)},
	{"ld: cluster with a newline", tLD, mkEvent(tLD, `{"broker":1,"cluster":"local\n"}`)},
	{"bo: timeout", tBO, mkEvent(tBO, `{"broker":1,"timeout":"1h"}`)},

	// replica-change-requested data.
	{"rc: no topic", tRC, mkEvent(tRC, `{"preferred_leader":1}`)},
	{"rc: empty topic", tRC, mkEvent(tRC, `{"topic":"","preferred_leader":1}`)},
	{"rc: null topic", tRC, mkEvent(tRC, `{"topic":null,"preferred_leader":1}`)},
	{"rc: topic a number", tRC, mkEvent(tRC, `{"topic":5,"preferred_leader":1}`)},
	{"rc: topic with a space", tRC, mkEvent(tRC, `{"topic":"my topic","preferred_leader":1}`)},
	{"rc: topic with a slash", tRC, mkEvent(tRC, `{"topic":"a/b","preferred_leader":1}`)},
	{"rc: topic with a colon", tRC, mkEvent(tRC, `{"topic":"a:b","preferred_leader":1}`)},
	{"rc: topic not ASCII", tRC, mkEvent(tRC, `{"topic":"bestellungen-\u00fc","preferred_leader":1}`)},
	{"rc: topic .", tRC, mkEvent(tRC, `{"topic":".","preferred_leader":1}`)},
	{"rc: topic ..", tRC, mkEvent(tRC, `{"topic":"..","preferred_leader":1}`)},
	{"rc: topic over 249 characters", tRC, mkEvent(tRC, `{"topic":"`+strings.Repeat("t", MaxTopicNameLength+1)+`","preferred_leader":1}`)},
	{"rc: topic with a trailing newline", tRC, mkEvent(tRC, `{"topic":"orders\n","preferred_leader":1}`)},
	{"bo: an empty topic", tBO, mkEvent(tBO, `{"broker":1,"topics":[""]}`)},
	{"bo: an excluded topic with a star", tBO, mkEvent(tBO, `{"broker":1,"exclude_topics":["a*"]}`)},
	{"ld: topic with a space", tLD, mkEvent(tLD, `{"broker":1,"topic":"a b","partition":0,"to_dir":"/b"}`)},
	{"ld: to_dir relative", tLD, mkEvent(tLD, `{"broker":1,"to_dir":"data/kafka"}`)},
	{"ld: from_dir with a .. element", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/data/../etc"}`)},
	{"ld: to_dir ending in ..", tLD, mkEvent(tLD, `{"broker":1,"to_dir":"/data/.."}`)},
	{"ld: to_dir ..", tLD, mkEvent(tLD, `{"broker":1,"to_dir":"/.."}`)},
	{"ld: to_dir with a newline", tLD, mkEvent(tLD, `{"broker":1,"to_dir":"/data\n"}`)},
	{"ld: from_dir with a NUL", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/data\u0000/x"}`)},
	{"ld: to_dir over 1024 characters", tLD, mkEvent(tLD, `{"broker":1,"to_dir":"/`+strings.Repeat("d", MaxDirLength)+`"}`)},
	{"rc: neither operation", tRC, mkEvent(tRC, `{"topic":"o"}`)},
	{"rc: neither operation, both null", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":null,"replication_factor":null}`)},
	{"rc: both operations", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"replication_factor":3}`)},
	{"rc: negative preferred_leader", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":-1}`)},
	{"rc: preferred_leader a string", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":"2"}`)},
	{"rc: preferred_leader beyond int32", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":4294967296}`)},
	{"rc: replication_factor a string", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":"3"}`)},
	{"rc: replication_factor a fraction", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2.5}`)},
	{"rc: empty partitions", tRC, mkEvent(tRC, `{"topic":"o","partitions":[],"preferred_leader":1}`)},
	{"rc: a null partition", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[null]}`)},
	{"rc: a null among partitions", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[0,null,2]}`)},
	{"rc: partitions over the cap", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[`+repeatJSON(`0`, MaxListedPartitions+1)+`]}`)},
	{"rc: replication factor 0", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":0}`)},
	{"rc: negative replication factor", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":-1}`)},
	{"rc: replication factor over Kafka's limit", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":32768}`)},
	{"rc: replication factor beyond int64", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":1e40}`)},
	{"rc: throttle over 2^53-1", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"throttle_bytes_per_sec":9007199254740992}`)},
	{"rc: throttle at int64's limit", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"throttle_bytes_per_sec":9223372036854775807}`)},
	{"rc: negative partition", tRC, mkEvent(tRC, `{"topic":"o","partitions":[1,-1],"preferred_leader":1}`)},
	{"rc: partitions a number", tRC, mkEvent(tRC, `{"topic":"o","partitions":1,"preferred_leader":1}`)},
	{"rc: partitions of strings", tRC, mkEvent(tRC, `{"topic":"o","partitions":["1"],"preferred_leader":1}`)},
	{"rc: partition beyond int32", tRC, mkEvent(tRC, `{"topic":"o","partitions":[2147483648],"preferred_leader":1}`)},
	{"rc: unknown strategy", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":"yolo"}`)},
	{"rc: strategy in upper case", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":"API"}`)},
	{"rc: strategy a number", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":1}`)},
	{"rc: negative throttle", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"throttle_bytes_per_sec":-1}`)},
	{"rc: throttle a string", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"throttle_bytes_per_sec":"10MB"}`)},
	{"rc: timeout not a duration", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"soon"}`)},
	{"rc: timeout without unit", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"60"}`)},
	{"rc: timeout zero", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"0s"}`)},
	{"rc: timeout bare zero", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"0"}`)},
	{"rc: negative timeout", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"-5m"}`)},
	{"rc: timeout with a space", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"1 h"}`)},
	{"rc: timeout with a trailing newline", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"1h\n"}`)},
	{"rc: timeout in days", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":"1d"}`)},
	{"rc: timeout a number", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":60}`)},
	{"rc: timeout null", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":3,"timeout":null}`)},
	{"rc: field with a long s", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"ſtrategy":"api"}`)},
	{"rc: unknown field", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"leader":2}`)},

	// logdir-move-requested data.
	{"ld: no broker", tLD, mkEvent(tLD, `{"from_dir":"/a"}`)},
	{"ld: negative broker", tLD, mkEvent(tLD, `{"broker":-1}`)},
	{"ld: topic without partition", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","to_dir":"/b"}`)},
	{"ld: partition without topic", tLD, mkEvent(tLD, `{"broker":1,"partition":2,"to_dir":"/b"}`)},
	{"ld: partition with an empty topic", tLD, mkEvent(tLD, `{"broker":1,"topic":"","partition":2,"to_dir":"/b"}`)},
	{"ld: explicit without to_dir", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":2}`)},
	{"ld: explicit with an empty to_dir", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":2,"to_dir":""}`)},
	{"ld: explicit and from_dir", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":2,"from_dir":"/a","to_dir":"/b"}`)},
	{"ld: negative partition", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":-2,"to_dir":"/b"}`)},
	{"ld: partition a string", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":"2","to_dir":"/b"}`)},
	{"ld: to_dir a number", tLD, mkEvent(tLD, `{"broker":1,"to_dir":5}`)},
	{"ld: negative throttle", tLD, mkEvent(tLD, `{"broker":1,"throttle_bytes_per_sec":-5}`)},
	{"ld: throttle over 2^53-1", tLD, mkEvent(tLD, `{"broker":1,"throttle_bytes_per_sec":9007199254740993}`)},
	{"ld: timeout not a duration", tLD, mkEvent(tLD, `{"broker":1,"timeout":"an hour"}`)},
	{"ld: unknown field", tLD, mkEvent(tLD, `{"broker":1,"disk":"/a"}`)},
	{"ld: partitions (plural)", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partitions":[2],"to_dir":"/b"}`)},

	// broker-failed and broker-drain data.
	{"bf: no broker", tBF, mkEvent(tBF, `{"rack":"a"}`)},
	{"bf: null broker", tBF, mkEvent(tBF, `{"broker":null}`)},
	{"bf: negative broker", tBF, mkEvent(tBF, `{"broker":-1}`)},
	{"bf: broker beyond int32", tBF, mkEvent(tBF, `{"broker":2147483648}`)},
	{"bf: broker a string", tBF, mkEvent(tBF, `{"broker":"3"}`)},
	{"bf: brokers (plural)", tBF, mkEvent(tBF, `{"broker":3,"brokers":[3]}`)},
	{"bf: rack a number", tBF, mkEvent(tBF, `{"broker":3,"rack":1}`)},
	{"bf: rack with a newline", tBF, mkEvent(tBF, `{"broker":3,"rack":"a\nb"}`)},
	{"bf: rack with a C1 control character", tBF, mkEvent(tBF, `{"broker":3,"rack":"a\u0085"}`)},
	{"bf: rack over 1024 characters", tBF, mkEvent(tBF, `{"broker":3,"rack":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},
	{"bf: negative throttle", tBF, mkEvent(tBF, `{"broker":3,"throttle_bytes_per_sec":-1}`)},
	{"bf: throttle over 2^53-1", tBF, mkEvent(tBF, `{"broker":3,"throttle_bytes_per_sec":9007199254740992}`)},
	{"bf: throttle a fraction", tBF, mkEvent(tBF, `{"broker":3,"throttle_bytes_per_sec":1.5}`)},
	{"bf: timeout zero", tBF, mkEvent(tBF, `{"broker":3,"timeout":"0s"}`)},
	{"bf: timeout negative", tBF, mkEvent(tBF, `{"broker":3,"timeout":"-1h"}`)},
	{"bf: timeout a number", tBF, mkEvent(tBF, `{"broker":3,"timeout":3600}`)},
	{"bf: reason with a tab", tBF, mkEvent(tBF, `{"broker":3,"reason":"a\tb"}`)},
	{"bf: dry_run a string", tBF, mkEvent(tBF, `{"broker":3,"dry_run":"true"}`)},
	{"bf: unknown field", tBF, mkEvent(tBF, `{"broker":3,"partitions":[0]}`)},
	{"bf: a topic name with a space", tBF, mkEvent(tBF, `{"broker":3,"topics":["o o"]}`)},
	{"bf: field in another case", tBF, mkEvent(tBF, `{"broker":3,"Rack":"a"}`)},
	{"bf: cluster not a token", tBF, mkEvent(tBF, `{"broker":3,"cluster":"a.b"}`)},
	{"bd: no broker", tBD, mkEvent(tBD, `{"dry_run":true}`)},
	{"bd: negative broker", tBD, mkEvent(tBD, `{"broker":-2}`)},
	{"bd: broker a fraction", tBD, mkEvent(tBD, `{"broker":2.5}`)},
	{"bd: rack (a broker-failed field)", tBD, mkEvent(tBD, `{"broker":2,"rack":"a"}`)},
	{"bd: a topic name with a slash", tBD, mkEvent(tBD, `{"broker":2,"topics":["a/b"]}`)},
	{"bd: negative throttle", tBD, mkEvent(tBD, `{"broker":2,"throttle_bytes_per_sec":-1}`)},
	{"bd: throttle over 2^53-1", tBD, mkEvent(tBD, `{"broker":2,"throttle_bytes_per_sec":9007199254740992}`)},
	{"bd: timeout not a duration", tBD, mkEvent(tBD, `{"broker":2,"timeout":"2 hours"}`)},
	{"bd: reason over 1024 characters", tBD, mkEvent(tBD, `{"broker":2,"reason":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},

	// broker-added data.
	{"ba: neither broker nor brokers", tBA, mkEvent(tBA, `{"reason":"r"}`)},
	{"ba: empty data", tBA, mkEvent(tBA, `{}`)},
	{"ba: both null", tBA, mkEvent(tBA, `{"broker":null,"brokers":null}`)},
	{"ba: both", tBA, mkEvent(tBA, `{"broker":4,"brokers":[5]}`)},
	{"ba: broker and an empty list", tBA, mkEvent(tBA, `{"broker":4,"brokers":[]}`)},
	{"ba: empty list", tBA, mkEvent(tBA, `{"brokers":[]}`)},
	{"ba: negative broker", tBA, mkEvent(tBA, `{"broker":-1}`)},
	{"ba: broker beyond int32", tBA, mkEvent(tBA, `{"broker":2147483648}`)},
	{"ba: negative broker in the list", tBA, mkEvent(tBA, `{"brokers":[4,-1]}`)},
	{"ba: listed broker beyond int32", tBA, mkEvent(tBA, `{"brokers":[2147483648]}`)},
	{"ba: listed broker a fraction", tBA, mkEvent(tBA, `{"brokers":[4.5]}`)},
	{"ba: listed broker a string", tBA, mkEvent(tBA, `{"brokers":["4"]}`)},
	{"ba: null in the list", tBA, mkEvent(tBA, `{"brokers":[4,null]}`)},
	{"ba: topics not a list", tBA, mkEvent(tBA, `{"broker":4,"topics":"orders"}`)},
	{"ba: a broker listed twice", tBA, mkEvent(tBA, `{"brokers":[4,5,4]}`)},
	{"ba: a broker listed twice, once as 4.0", tBA, mkEvent(tBA, `{"brokers":[4,4.0]}`)},
	{"ba: brokers over the cap", tBA, mkEvent(tBA, `{"brokers":[`+repeatJSON(`1`, MaxListedBrokers+1)+`]}`)},
	{"ba: brokers not a list", tBA, mkEvent(tBA, `{"brokers":4}`)},
	{"ba: broker a list", tBA, mkEvent(tBA, `{"broker":[4]}`)},
	{"ba: negative throttle", tBA, mkEvent(tBA, `{"broker":4,"throttle_bytes_per_sec":-1}`)},
	{"ba: timeout not a duration", tBA, mkEvent(tBA, `{"broker":4,"timeout":"soon"}`)},
	{"ba: rack (a broker-failed field)", tBA, mkEvent(tBA, `{"broker":4,"rack":"a"}`)},

	// partition-offline data.
	{"po: partitions without a topic", tPO, mkEvent(tPO, `{"partitions":[0]}`)},
	{"po: partitions with an empty topic", tPO, mkEvent(tPO, `{"topic":"","partitions":[0]}`)},
	{"po: partitions with a null topic", tPO, mkEvent(tPO, `{"topic":null,"partitions":[0,1]}`)},
	{"po: empty partitions", tPO, mkEvent(tPO, `{"topic":"o","partitions":[]}`)},
	{"po: empty partitions without a topic", tPO, mkEvent(tPO, `{"partitions":[]}`)},
	{"po: negative partition", tPO, mkEvent(tPO, `{"topic":"o","partitions":[0,-1]}`)},
	{"po: partition beyond int32", tPO, mkEvent(tPO, `{"topic":"o","partitions":[2147483648]}`)},
	{"po: partition a fraction", tPO, mkEvent(tPO, `{"topic":"o","partitions":[1.5]}`)},
	{"po: partition a string", tPO, mkEvent(tPO, `{"topic":"o","partitions":["1"]}`)},
	{"po: a null partition", tPO, mkEvent(tPO, `{"topic":"o","partitions":[null]}`)},
	{"po: partitions not a list", tPO, mkEvent(tPO, `{"topic":"o","partitions":1}`)},
	{"po: partitions over the cap", tPO, mkEvent(tPO, `{"topic":"o","partitions":[`+repeatJSON(`0`, MaxListedPartitions+1)+`]}`)},
	{"po: topic with a space", tPO, mkEvent(tPO, `{"topic":"my topic"}`)},
	{"po: topic ..", tPO, mkEvent(tPO, `{"topic":".."}`)},
	{"po: topic over 249 characters", tPO, mkEvent(tPO, `{"topic":"`+strings.Repeat("t", MaxTopicNameLength+1)+`"}`)},
	{"po: topic a number", tPO, mkEvent(tPO, `{"topic":5}`)},
	{"po: topics (plural)", tPO, mkEvent(tPO, `{"topics":["o"]}`)},
	{"po: allow_unclean a string", tPO, mkEvent(tPO, `{"allow_unclean":"true"}`)},
	{"po: allow_unclean a number", tPO, mkEvent(tPO, `{"allow_unclean":1}`)},
	{"po: dry_run a string", tPO, mkEvent(tPO, `{"dry_run":"yes"}`)},
	{"po: reason with a newline", tPO, mkEvent(tPO, `{"reason":"a\nb"}`)},
	{"po: a throttle", tPO, mkEvent(tPO, `{"throttle_bytes_per_sec":1000}`)},
	{"po: a timeout", tPO, mkEvent(tPO, `{"timeout":"1h"}`)},
	{"po: a broker", tPO, mkEvent(tPO, `{"broker":1}`)},
	{"po: field in another case", tPO, mkEvent(tPO, `{"Allow_unclean":true}`)},
	{"po: cluster not a token", tPO, mkEvent(tPO, `{"cluster":"a b"}`)},
	{"po: data null", tPO, mkEvent(tPO, `null`)},

	// cluster-pause data.
	{"cp: no reason", tCP, mkEvent(tCP, `{}`)},
	{"cp: no reason, an until", tCP, mkEvent(tCP, `{"until":"2026-12-04T18:00:00Z"}`)},
	{"cp: null reason", tCP, mkEvent(tCP, `{"reason":null}`)},
	{"cp: empty reason", tCP, mkEvent(tCP, `{"reason":""}`)},
	{"cp: blank reason", tCP, mkEvent(tCP, `{"reason":"   "}`)},
	{"cp: reason of Unicode white space only", tCP, mkEvent(tCP, `{"reason":" \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"}`)},
	{"cp: reason of a tab", tCP, mkEvent(tCP, `{"reason":"\t"}`)},
	{"cp: reason with a newline", tCP, mkEvent(tCP, `{"reason":"rack b\nmaintenance"}`)},
	{"cp: reason with a C1 control character", tCP, mkEvent(tCP, `{"reason":"a\u0085"}`)},
	{"cp: reason over 1024 characters", tCP, mkEvent(tCP, `{"reason":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},
	{"cp: reason a number", tCP, mkEvent(tCP, `{"reason":5}`)},
	{"cp: reason a list", tCP, mkEvent(tCP, `{"reason":["r"]}`)},
	{"cp: until not a time", tCP, mkEvent(tCP, `{"reason":"r","until":"tomorrow"}`)},
	{"cp: until a duration", tCP, mkEvent(tCP, `{"reason":"r","until":"2h"}`)},
	{"cp: until a date only", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04"}`)},
	{"cp: until without zone", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00"}`)},
	{"cp: until with a space", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04 18:00:00Z"}`)},
	{"cp: until with a trailing space", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00Z "}`)},
	{"cp: until with a trailing newline", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00Z\n"}`)},
	{"cp: until without seconds", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00Z"}`)},
	{"cp: until with an offset without colon", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00+0100"}`)},
	{"cp: until with hour 24", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T24:00:00Z"}`)},
	{"cp: until with a leap second", tCP, mkEvent(tCP, `{"reason":"r","until":"2016-12-31T23:59:60Z"}`)},
	{"cp: until on February 29 of a common year", tCP, mkEvent(tCP, `{"reason":"r","until":"2027-02-29T10:00:00Z"}`)},
	{"cp: until on April 31", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-04-31T10:00:00Z"}`)},
	{"cp: until with an empty fraction", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00.Z"}`)},
	{"cp: until with a one-digit hour", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T9:00:00Z"}`)},
	{"cp: until with a fraction of 10 digits", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00.1234567891Z"}`)},
	{"cp: until with a comma before the fraction", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00,5Z"}`)},
	{"cp: until with offset hour 24", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00+24:00"}`)},
	{"cp: until with offset minute 60", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00+01:60"}`)},
	{"cp: until a number", tCP, mkEvent(tCP, `{"reason":"r","until":1796180400}`)},
	{"cp: until a boolean", tCP, mkEvent(tCP, `{"reason":"r","until":true}`)},
	{"cp: dry_run", tCP, mkEvent(tCP, `{"reason":"r","dry_run":true}`)},
	{"cp: unknown field", tCP, mkEvent(tCP, `{"reason":"r","for":"2h"}`)},
	{"cp: field in another case", tCP, mkEvent(tCP, `{"reason":"r","Until":"2026-12-04T18:00:00Z"}`)},
	{"cp: reason in another case only", tCP, mkEvent(tCP, `{"Reason":"r"}`)},
	{"cp: cluster not a token", tCP, mkEvent(tCP, `{"reason":"r","cluster":"a b"}`)},
	{"cp: data null", tCP, mkEvent(tCP, `null`)},

	// cluster-resume data.
	{"cr: until (a cluster-pause field)", tCR, mkEvent(tCR, `{"until":"2026-12-04T18:00:00Z"}`)},
	{"cr: dry_run", tCR, mkEvent(tCR, `{"dry_run":true}`)},
	{"cr: reason with a tab", tCR, mkEvent(tCR, `{"reason":"a\tb"}`)},
	{"cr: reason over 1024 characters", tCR, mkEvent(tCR, `{"reason":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},
	{"cr: reason a number", tCR, mkEvent(tCR, `{"reason":1}`)},
	{"cr: field in another case", tCR, mkEvent(tCR, `{"Reason":"r"}`)},
	{"cr: cluster not a token", tCR, mkEvent(tCR, `{"cluster":"a.b"}`)},
	{"cr: data null", tCR, mkEvent(tCR, `null`)},
	{"cr: data a list", tCR, mkEvent(tCR, `[]`)},

	// operation-cancel data.
	{"oc: no id", tOC, mkEvent(tOC, `{}`)},
	{"oc: no id, a reason", tOC, mkEvent(tOC, `{"reason":"r"}`)},
	{"oc: null id", tOC, mkEvent(tOC, `{"id":null}`)},
	{"oc: empty id", tOC, mkEvent(tOC, `{"id":""}`)},
	{"oc: id with a dot", tOC, mkEvent(tOC, `{"id":"bd.2"}`)},
	{"oc: id with a space", tOC, mkEvent(tOC, `{"id":"bd 2"}`)},
	{"oc: id with a trailing newline", tOC, mkEvent(tOC, `{"id":"bd-2\n"}`)},
	{"oc: id a wildcard", tOC, mkEvent(tOC, `{"id":">"}`)},
	{"oc: id not ASCII", tOC, mkEvent(tOC, `{"id":"bd-\u00fc"}`)},
	{"oc: id over 128 characters", tOC, mkEvent(tOC, `{"id":"`+strings.Repeat("i", MaxIDLength+1)+`"}`)},
	{"oc: id a number", tOC, mkEvent(tOC, `{"id":2}`)},
	{"oc: id a list", tOC, mkEvent(tOC, `{"id":["bd-2"]}`)},
	{"oc: reason with a tab", tOC, mkEvent(tOC, `{"id":"bd-2","reason":"a\tb"}`)},
	{"oc: reason over 1024 characters", tOC, mkEvent(tOC, `{"id":"bd-2","reason":"`+strings.Repeat("r", MaxTextLength+1)+`"}`)},
	{"oc: reason a number", tOC, mkEvent(tOC, `{"id":"bd-2","reason":1}`)},
	{"oc: dry_run", tOC, mkEvent(tOC, `{"id":"bd-2","dry_run":true}`)},
	{"oc: unknown field", tOC, mkEvent(tOC, `{"id":"bd-2","event":"bd-3"}`)},
	{"oc: field in another case", tOC, mkEvent(tOC, `{"ID":"bd-2"}`)},
	{"oc: cluster not a token", tOC, mkEvent(tOC, `{"id":"bd-2","cluster":"a.b"}`)},
	{"oc: data null", tOC, mkEvent(tOC, `null`)},
	{"oc: data a list", tOC, mkEvent(tOC, `[]`)},
}

// validEvents are events the decoder takes, at the edges of what it takes: the schemas must
// take them too.
var validEvents = []schemaCase{
	{"minimal", tBO, mkEvent(tBO, `{"broker":0}`)},
	{"every attribute", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00Z"`, `"expiresat":"2026-11-29T10:05:00.123456789+01:00"`,
		`"datacontenttype":"application/json"`, `"subject":"broker 1"`, `"dataschema":"https://example.com/s"`)},
	{"null optional attributes (CloudEvents: as absent)", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":null`, `"subject":null`, `"dataschema":null`, `"trace":null`)},
	{"extensions of every CloudEvents type", tBO, mkEvent(tBO, `{"broker":1}`, `"traceparent":"00-ab"`, `"n1":5`, `"b":true`, `"u":"https://x/y"`, `"t":"2026-11-29T10:00:00Z"`)},
	{"extension integers at the limits of 32 bits", tBO, mkEvent(tBO, `{"broker":1}`, `"lo":-2147483648`, `"hi":2147483647`)},
	{"extension of 1024 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"x":"`+strings.Repeat("x", MaxTextLength)+`"`)},
	{"source of 1024 characters, none ASCII", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"`+strings.Repeat("\u00e9", MaxTextLength)+`"`)},
	{"source with a line separator (not a control character)", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"a\u2028b"`)},
	{"subject and dataschema of 1024 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"subject":"`+strings.Repeat("s", MaxTextLength)+`"`, `"dataschema":"`+strings.Repeat("d", MaxTextLength)+`"`)},
	{"bo: reason of 1024 characters", tBO, mkEvent(tBO, `{"broker":1,"reason":"`+strings.Repeat("\u4e00", MaxTextLength)+`"}`)},
	{"extension of 20 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"abcdefghijklmnopqrst":"x"`)},
	{"datacontenttype with parameters and case", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":" Application/JSON; charset=utf-8"`)},
	{"datacontenttype empty", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":""`)},
	{"datacontenttype with parameters of every form", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json ;charset=\"utf-8\"; ;a=\"x\\\"y \";b=c.d ; "`)},
	{"datacontenttype with an empty parameter list", tBO, mkEvent(tBO, `{"broker":1}`, `"datacontenttype":"application/json;"`)},
	{"time with lower-case t and z (RFC 3339's note)", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29t10:00:00z"`)},
	{"time with nanoseconds and an offset", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2026-11-29T10:00:00.999999999-23:59"`)},
	{"time on February 29 of leap years", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"2024-02-29T00:00:00Z"`, `"expiresat":"2000-02-29T23:59:59.5+00:00"`)},
	{"time in year 0", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"0000-02-29T00:00:00Z"`)},
	{"time on December 31", tBO, mkEvent(tBO, `{"broker":1}`, `"time":"9999-12-31T23:59:59Z"`)},
	{"time far in the past", tBO, mkEvent(tBO, `{"broker":1}`, `"expiresat":"2000-01-01T00:00:00Z"`)},
	{"id of every token character", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"AZaz09-_"`)},
	{"id of 128 characters", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"`+strings.Repeat("i", MaxIDLength)+`"`)},
	{"uuid id", tBO, mkEvent(tBO, `{"broker":1}`, `"id":"0f8fad5b-d9cb-469f-a165-70867728950e"`)},
	{"bo: every field", tBO, mkEvent(tBO, `{"cluster":"local","broker":2147483647,"topics":["a","b"],"exclude_topics":["c"],"max_partitions":0,"demote_to_end":true,"dry_run":false,"reason":"r"}`)},
	{"bo: null optional fields", tBO, mkEvent(tBO, `{"broker":1,"cluster":null,"topics":null,"exclude_topics":null,"max_partitions":null,"demote_to_end":null,"dry_run":null,"reason":null}`)},
	{"bo: max_partitions at 2^53-1", tBO, mkEvent(tBO, `{"broker":1,"max_partitions":9007199254740991}`)},
	{"bo: topics and exclude_topics at their caps", tBO, mkEvent(tBO, `{"broker":1,"topics":[`+repeatJSON(`"a"`, MaxListedTopics)+`],"exclude_topics":[`+repeatJSON(`"b"`, MaxListedTopics)+`]}`)},
	{"bo: empty topics", tBO, mkEvent(tBO, `{"broker":1,"topics":[],"exclude_topics":[]}`)},
	{"bo: empty cluster", tBO, mkEvent(tBO, `{"broker":1,"cluster":""}`)},
	{"bo: broker -0", tBO, mkEvent(tBO, `{"broker":-0}`)},
	{"bo: integers written with a fraction or an exponent", tBO, mkEvent(tBO, `{"broker":1.0,"max_partitions":1e2}`)},
	{"bo: broker -0.0", tBO, mkEvent(tBO, `{"broker":-0.0}`)},
	{"bo: broker 2.0e9", tBO, mkEvent(tBO, `{"broker":2.0e9}`)},
	{"rc: partitions written with exponents", tRC, mkEvent(tRC, `{"topic":"o","partitions":[50E-1,0.2e1,30e-1],"preferred_leader":1}`)},
	{"extension integer written with a fraction", tBO, mkEvent(tBO, `{"broker":1}`, `"n1":5.0`)},
	{"rc: topic of 249 characters of every kind Kafka takes", tRC, mkEvent(tRC, `{"topic":"`+strings.Repeat("aZ09._-", 35)+`abcd","preferred_leader":1}`)},
	{"rc: topics of dots", tRC, mkEvent(tRC, `{"topic":"...","preferred_leader":1}`)},
	{"rc: an internal topic", tRC, mkEvent(tRC, `{"topic":"__consumer_offsets","preferred_leader":1}`)},
	{"bo: topics of 249 characters", tBO, mkEvent(tBO, `{"broker":1,"topics":["`+strings.Repeat("t", MaxTopicNameLength)+`"],"exclude_topics":[".a"]}`)},
	{"rc: preferred leader", tRC, mkEvent(tRC, `{"topic":"orders","partitions":[0,1],"preferred_leader":0,"strategy":"zk-nudge"}`)},
	{"rc: replication factor", tRC, mkEvent(tRC, `{"topic":"orders","replication_factor":3,"strategy":"zk-reassign","throttle_bytes_per_sec":0,"timeout":"1h30m","dry_run":true,"reason":"r"}`)},
	{"rc: replication factor 1", tRC, mkEvent(tRC, `{"topic":"orders","replication_factor":1}`)},
	{"rc: replication factor at Kafka's limit", tRC, mkEvent(tRC, `{"topic":"orders","replication_factor":32767}`)},
	{"rc: throttle at 2^53-1", tRC, mkEvent(tRC, `{"topic":"orders","replication_factor":2,"throttle_bytes_per_sec":9007199254740991}`)},
	{"rc: partitions at the cap", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":[`+repeatJSON(`99999`, MaxListedPartitions)+`]}`)},
	{"rc: the other operation null", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":null,"replication_factor":2}`)},
	{"rc: null partitions, strategy and more", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"partitions":null,"strategy":null,"throttle_bytes_per_sec":null,"dry_run":null,"reason":null,"cluster":null}`)},
	{"rc: empty strategy", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":""}`)},
	{"rc: auto", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":"auto"}`)},
	{"rc: api", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"strategy":"api"}`)},
	{"rc: timeout with a sign and a fraction", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":"+.5h"}`)},
	{"rc: timeout 1.h", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":"1.h"}`)},
	{"rc: timeout in micro seconds", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":"1µs2μs3us4ns5ms"}`)},
	{"ld: balance", tLD, mkEvent(tLD, `{"broker":1}`)},
	{"ld: dirs with dots that are no .. element", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/a/.b/..c/./d..","to_dir":"/"}`)},
	{"ld: dirs of 1024 characters, none ASCII", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/`+strings.Repeat("\u00e9", MaxDirLength-1)+`","to_dir":"/donn\u00e9es"}`)},
	{"ld: explicit move of a topic of 249 characters", tLD, mkEvent(tLD, `{"broker":1,"topic":"`+strings.Repeat("t", MaxTopicNameLength)+`","partition":0,"to_dir":"/b"}`)},
	{"ld: throttle at 2^53-1", tLD, mkEvent(tLD, `{"broker":1,"throttle_bytes_per_sec":9007199254740991}`)},
	{"ld: balance between two", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/a","to_dir":"/b/","throttle_bytes_per_sec":1000,"timeout":"10m"}`)},
	{"ld: explicit", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":0,"to_dir":"/b","dry_run":true,"reason":"r"}`)},
	{"ld: explicit, empty from_dir", tLD, mkEvent(tLD, `{"broker":1,"topic":"o","partition":0,"to_dir":"/b","from_dir":""}`)},
	{"ld: empty topic and null partition (a balance)", tLD, mkEvent(tLD, `{"broker":1,"topic":"","partition":null,"from_dir":"/a"}`)},
	{"bf: broker only", tBF, mkEvent(tBF, `{"broker":3}`)},
	{"bf: broker 0", tBF, mkEvent(tBF, `{"broker":0}`)},
	{"bf: broker at int32's limit", tBF, mkEvent(tBF, `{"broker":2147483647}`)},
	{"bf: everything", tBF, mkEvent(tBF, `{"cluster":"local","broker":3,"rack":"eu-west-1a","throttle_bytes_per_sec":52428800,"timeout":"4h","dry_run":true,"reason":"gone"}`)},
	{"bf: rack of 1024 characters, none ASCII", tBF, mkEvent(tBF, `{"broker":3,"rack":"`+strings.Repeat("\u00e9", MaxTextLength)+`"}`)},
	{"bf: rack with spaces and dots", tBF, mkEvent(tBF, `{"broker":3,"rack":"rack 1/room.b"}`)},
	{"bf: empty rack", tBF, mkEvent(tBF, `{"broker":3,"rack":""}`)},
	{"bf: nulls", tBF, mkEvent(tBF, `{"broker":3,"rack":null,"throttle_bytes_per_sec":null,"dry_run":null,"reason":null,"cluster":null}`)},
	{"bf: throttle at 2^53-1", tBF, mkEvent(tBF, `{"broker":3,"throttle_bytes_per_sec":9007199254740991}`)},
	{"bf: throttle 0 (the default)", tBF, mkEvent(tBF, `{"broker":3,"throttle_bytes_per_sec":0}`)},
	{"bf: broker written 3.0", tBF, mkEvent(tBF, `{"broker":3.0}`)},
	{"bd: broker only", tBD, mkEvent(tBD, `{"broker":2}`)},
	{"bd: everything", tBD, mkEvent(tBD, `{"cluster":"","broker":2,"throttle_bytes_per_sec":1048576,"timeout":"90m","dry_run":false,"reason":"maintenance"}`)},
	{"bd: throttle at 2^53-1", tBD, mkEvent(tBD, `{"broker":2,"throttle_bytes_per_sec":9007199254740991}`)},
	{"ba: one broker", tBA, mkEvent(tBA, `{"broker":4}`)},
	{"ba: broker 0", tBA, mkEvent(tBA, `{"broker":0}`)},
	{"ba: brokers", tBA, mkEvent(tBA, `{"brokers":[4,5,6],"throttle_bytes_per_sec":20971520,"timeout":"3h","dry_run":true,"reason":"rack c"}`)},
	{"ba: one listed broker", tBA, mkEvent(tBA, `{"brokers":[0]}`)},
	{"ba: broker and null brokers", tBA, mkEvent(tBA, `{"broker":4,"brokers":null}`)},
	{"ba: brokers and null broker", tBA, mkEvent(tBA, `{"broker":null,"brokers":[4,2147483647]}`)},
	{"ba: brokers at the cap", tBA, mkEvent(tBA, `{"brokers":[`+brokerList(MaxListedBrokers)+`]}`)},
	{"po: every offline partition", tPO, mkEvent(tPO, `{}`)},
	{"po: everything", tPO, mkEvent(tPO, `{"cluster":"local","topic":"orders","partitions":[0,3],"allow_unclean":true,"dry_run":true,"reason":"brokers 1 and 2 lost"}`)},
	{"po: a topic", tPO, mkEvent(tPO, `{"topic":"orders"}`)},
	{"po: unclean allowed", tPO, mkEvent(tPO, `{"allow_unclean":true}`)},
	{"po: unclean not allowed", tPO, mkEvent(tPO, `{"topic":"orders","allow_unclean":false}`)},
	{"po: empty topic (as absent)", tPO, mkEvent(tPO, `{"topic":""}`)},
	{"po: nulls", tPO, mkEvent(tPO, `{"cluster":null,"topic":null,"partitions":null,"allow_unclean":null,"dry_run":null,"reason":null}`)},
	{"po: a topic and null partitions", tPO, mkEvent(tPO, `{"topic":"o","partitions":null}`)},
	{"po: a partition repeated", tPO, mkEvent(tPO, `{"topic":"o","partitions":[1,1]}`)},
	{"po: partitions at int32's limit, written with exponents", tPO, mkEvent(tPO, `{"topic":"o","partitions":[2147483647,0.2e1]}`)},
	{"po: partitions at the cap", tPO, mkEvent(tPO, `{"topic":"o","partitions":[`+repeatJSON(`99999`, MaxListedPartitions)+`]}`)},
	{"po: topic of 249 characters", tPO, mkEvent(tPO, `{"topic":"`+strings.Repeat("t", MaxTopicNameLength)+`","partitions":[0]}`)},
	{"po: an internal topic", tPO, mkEvent(tPO, `{"topic":"__consumer_offsets"}`)},
	{"cp: a reason", tCP, mkEvent(tCP, `{"reason":"rack b maintenance"}`)},
	{"cp: everything", tCP, mkEvent(tCP, `{"cluster":"local","reason":"rack b maintenance (CHG-1234)","until":"2026-12-04T18:00:00Z"}`)},
	{"cp: until with a fraction and an offset", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00.123456789-05:30"}`)},
	{"cp: until on February 29 of a leap year", tCP, mkEvent(tCP, `{"reason":"r","until":"2028-02-29T00:00:00+00:00"}`)},
	{"cp: until in the past (refused when handled, not when read)", tCP, mkEvent(tCP, `{"reason":"r","until":"2000-01-01T00:00:00Z"}`)},
	{"cp: until far ahead (refused when handled, not when read)", tCP, mkEvent(tCP, `{"reason":"r","until":"9999-12-31T23:59:59Z"}`)},
	{"cp: until with lower-case t and z (RFC 3339's note)", tCP, mkEvent(tCP, `{"reason":"r","until":"2026-12-04t18:00:00z"}`)},
	{"cp: null until", tCP, mkEvent(tCP, `{"reason":"r","until":null}`)},
	{"cp: empty until (as absent)", tCP, mkEvent(tCP, `{"reason":"r","until":""}`)},
	{"cp: nulls", tCP, mkEvent(tCP, `{"cluster":null,"reason":"r","until":null}`)},
	{"cp: empty cluster", tCP, mkEvent(tCP, `{"cluster":"","reason":"r"}`)},
	{"cp: reason of one character among spaces", tCP, mkEvent(tCP, `{"reason":" \u3000x\u00a0 "}`)},
	{"cp: reason of a zero-width space (no white space)", tCP, mkEvent(tCP, `{"reason":"\u200b"}`)},
	{"cp: reason of a byte order mark (no white space)", tCP, mkEvent(tCP, `{"reason":"\ufeff"}`)},
	{"cp: reason of a line separator and a letter", tCP, mkEvent(tCP, `{"reason":"\u2028a"}`)},
	{"cp: reason of 1024 characters, none ASCII", tCP, mkEvent(tCP, `{"reason":"`+strings.Repeat("\u00e9", MaxTextLength)+`"}`)},
	{"cr: empty data", tCR, mkEvent(tCR, `{}`)},
	{"cr: everything", tCR, mkEvent(tCR, `{"cluster":"local","reason":"rack b back"}`)},
	{"cr: nulls", tCR, mkEvent(tCR, `{"cluster":null,"reason":null}`)},
	{"cr: empty reason", tCR, mkEvent(tCR, `{"reason":""}`)},
	{"cr: blank reason", tCR, mkEvent(tCR, `{"reason":"  "}`)},
	{"oc: an id", tOC, mkEvent(tOC, `{"id":"bd-2"}`)},
	{"oc: everything", tOC, mkEvent(tOC, `{"cluster":"local","id":"bd-2","reason":"wrong broker, drain 4 instead"}`)},
	{"oc: nulls", tOC, mkEvent(tOC, `{"cluster":null,"id":"bd-2","reason":null}`)},
	{"oc: empty cluster and reason", tOC, mkEvent(tOC, `{"cluster":"","id":"bd-2","reason":""}`)},
	{"oc: blank reason", tOC, mkEvent(tOC, `{"id":"bd-2","reason":"  "}`)},
	{"oc: id of 128 characters", tOC, mkEvent(tOC, `{"id":"`+strings.Repeat("i", MaxIDLength)+`"}`)},
	{"oc: id of one character", tOC, mkEvent(tOC, `{"id":"_"}`)},
	{"oc: its own id (refused when handled, not when read)", tOC, mkEvent(tOC, `{"id":"a1b2"}`)},
}

// brokerList is n distinct broker ids, comma-separated.
func brokerList(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return strings.Join(ids, ",")
}

// schemaBlindRules are the decoder's rules that no JSON Schema can state (why): an event
// that breaks only these, the schemas take and the decoder rejects. docs/contract.md lists
// each (doc is its words there); says are what each of the decoder's messages about it
// holds, one of them.
var schemaBlindRules = map[string]schemaBlindRule{
	"subject's cluster": {"must be one the workers serve", "a schema knows neither the subject nor the workers' configuration",
		[]string{"unknown cluster", "does not match the subject's cluster"}},
	"topics and excluded": {"no topic in both", "JSON Schema cannot compare the values of two members", []string{"is also in data.topics"}},
	"same directory":      {"not the same directory", "JSON Schema cannot compare the values of two members", []string{"are the same directory"}},
	"Go duration":         {"within Go's range of durations", "a pattern cannot compare a duration's value", []string{"out of the range of a duration"}},
	"body size":           {"a body of at most 1 MiB", "JSON Schema bounds values, not a message's bytes", []string{"more than the limit of"}},
	"repeated member":     {"a member name twice in one object", "a validator sees the JSON parsed, one of the two values already dropped", []string{"appears twice"}},
	"not UTF-8":           {"text that is not UTF-8", "a validator sees the JSON parsed, the bytes already replaced or refused", []string{"not UTF-8"}},
}

type schemaBlindRule struct {
	doc, why string
	says     []string
}

// schemaBlindEvents break one schema-blind rule each (rule: its key of schemaBlindRules),
// published for cluster (default local).
var schemaBlindEvents = []struct {
	schemaCase
	rule, cluster string
}{
	{schemaCase{"unknown cluster", tBO, mkEvent(tBO, `{"broker":1}`)}, "subject's cluster", "prod"},
	{schemaCase{"data.cluster not the subject's", tBO, mkEvent(tBO, `{"broker":1,"cluster":"kraft"}`)}, "subject's cluster", ""},
	{schemaCase{"data.cluster of 64 characters, not the subject's", tRC, mkEvent(tRC, `{"topic":"o","preferred_leader":1,"cluster":"`+strings.Repeat("c", MaxClusterNameLength)+`"}`)}, "subject's cluster", ""},
	{schemaCase{"bo: a topic also excluded", tBO, mkEvent(tBO, `{"broker":1,"topics":["a","b"],"exclude_topics":["b"]}`)}, "topics and excluded", ""},
	{schemaCase{"ld: from_dir is to_dir", tLD, mkEvent(tLD, `{"broker":1,"from_dir":"/a","to_dir":"/a"}`)}, "same directory", ""},
	{schemaCase{"rc: timeout beyond 292 years", tRC, mkEvent(tRC, `{"topic":"o","replication_factor":2,"timeout":"2562048h"}`)}, "Go duration", ""},
	{schemaCase{"ld: timeout under a nanosecond", tLD, mkEvent(tLD, `{"broker":1,"timeout":"0.5ns"}`)}, "Go duration", ""},
	{schemaCase{"body over 1 MiB", tBO, mkEvent(tBO, `{"broker":1}`+strings.Repeat(" ", DefaultMaxBytes))}, "body size", ""},
	{schemaCase{"bo: duplicate member", tBO, mkEvent(tBO, `{"broker":-1,"broker":1}`)}, "repeated member", ""},
	{schemaCase{"duplicate attribute", tBO, mkEvent(tBO, `{"broker":1}`, `"source":"a"`, `"source":"b"`)}, "repeated member", ""},
	{schemaCase{"duplicate extension", tBO, mkEvent(tBO, `{"broker":1}`, `"x":"a"`, `"x":"b"`)}, "repeated member", ""},
	{schemaCase{"duplicate member by its escape", tBO, mkEvent(tBO, `{"broker":1,"\u0062roker":1}`)}, "repeated member", ""},
	{schemaCase{"reason not UTF-8", tBO, mkEvent(tBO, "{\"broker\":1,\"reason\":\"\xff\"}")}, "not UTF-8", ""},
	{schemaCase{"source not UTF-8", tBO, mkEvent(tBO, `{"broker":1}`, "\"source\":\"a\xc3\"")}, "not UTF-8", ""},
}

// What only the decoder's schema-blind rules reject, the schemas take (in both readings of
// their patterns): a case the schemas reject belongs to invalidEvents. Each rule has a case,
// and docs/contract.md names it.
func TestSchemaBlindRules(t *testing.T) {
	s, py := newSchemaSet(t), newSchemaSetWith(t, pythonRegexp)
	contract, err := os.ReadFile(filepath.Join(docsDir(t), "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, tc := range schemaBlindEvents {
		t.Run(tc.name, func(t *testing.T) {
			rule, ok := schemaBlindRules[tc.rule]
			if !ok {
				t.Fatalf("no schema-blind rule %q", tc.rule)
			}
			used[tc.rule] = true
			for reading, set := range map[string]*schemaSet{"": s, ", its patterns read as Python's re reads them,": py} {
				if err := set.validate(t, eventSchema(tc.typ), []byte(tc.body)); err != nil {
					t.Errorf("the schema%s rejects it (move it to invalidEvents): %v\n%s", reading, err, short(tc.body))
				}
			}
			cluster := tc.cluster
			if cluster == "" {
				cluster = "local"
			}
			_, err := Decode(Subject(cluster, tc.typ), nil, []byte(tc.body), schemaDecodeOptions)
			if err == nil {
				t.Fatalf("Decode takes %s", short(tc.body))
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !slices.ContainsFunc(rule.says, func(say string) bool { return strings.Contains(line, say) }) {
					t.Errorf("Decode rejects it for more than %s: %s", tc.rule, line)
				}
			}
		})
	}
	for name, rule := range schemaBlindRules {
		if !used[name] {
			t.Errorf("schema-blind rule %q has no case in schemaBlindEvents", name)
		}
		if !bytes.Contains(contract, []byte(rule.doc)) {
			t.Errorf("docs/contract.md does not list the schema-blind rule %q (as %q)", name, rule.doc)
		}
	}
}

func TestSchemaRejectsWhatDecoderRejects(t *testing.T) {
	s, py := newSchemaSet(t), newSchemaSetWith(t, pythonRegexp)
	for _, tc := range invalidEvents {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.validate(t, eventSchema(tc.typ), []byte(tc.body)); err == nil {
				t.Errorf("the schema takes %s", short(tc.body))
			}
			if len(tc.body) < 1<<16 { // patterns concern short strings only: spare the largest lists a third validation
				if err := py.validate(t, eventSchema(tc.typ), []byte(tc.body)); err == nil {
					t.Errorf("the schema, its patterns read as Python's re reads them, takes %s", short(tc.body))
				}
			}
			if _, err := Decode(Subject("local", tc.typ), nil, []byte(tc.body), schemaDecodeOptions); err == nil {
				t.Errorf("Decode takes %s", short(tc.body))
			}
		})
	}
}

func TestSchemaTakesWhatDecoderTakes(t *testing.T) {
	s, py := newSchemaSet(t), newSchemaSetWith(t, pythonRegexp)
	for _, tc := range validEvents {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(Subject("local", tc.typ), nil, []byte(tc.body), schemaDecodeOptions); err != nil {
				t.Fatalf("Decode rejects %s: %v", short(tc.body), err)
			}
			if err := s.validate(t, eventSchema(tc.typ), []byte(tc.body)); err != nil {
				t.Errorf("the schema rejects %s: %v", short(tc.body), err)
			}
			if len(tc.body) < 1<<16 { // as above
				if err := py.validate(t, eventSchema(tc.typ), []byte(tc.body)); err != nil {
					t.Errorf("the schema, its patterns read as Python's re reads them, rejects %s: %v", short(tc.body), err)
				}
			}
			if len(tc.body) >= 1<<16 {
				return // a list at its cap: binary mode reads lists alike
			}
			// Binary mode: the data alone, against the data schema.
			var env struct{ Data json.RawMessage }
			if err := json.Unmarshal([]byte(tc.body), &env); err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(Subject("local", tc.typ), binaryHeader(tc.typ), env.Data, schemaDecodeOptions); err != nil {
				t.Fatalf("Decode rejects the data in binary mode %s: %v", short(env.Data), err)
			}
			if err := s.validate(t, dataSchema(tc.typ), env.Data); err != nil {
				t.Errorf("the data schema rejects %s: %v", short(env.Data), err)
			}
		})
	}
}

func binaryHeader(typ string) Header {
	return Header{"ce-specversion": {SpecVersion}, "ce-id": {"a1b2"}, "ce-source": {"test"}, "ce-type": {typ}}
}

// FuzzSchemaAndDecoderAgree mutates events and checks that the schema of the subject's type
// and Decode agree on them: whatever the schema rejects, Decode rejects too (the schemas are
// never stricter than the workers), and whatever Decode rejects, the schema rejects too,
// unless Decode's every reason is a rule of schemaBlindRules. The schema's verdict is the
// same with its patterns read as Python's re reads them. Mutations are the fuzzer's, on the
// bytes of the event, plus one member (name and raw JSON value) set in the envelope or in
// its data. binary checks the data alone against the data schema, as binary mode sends it.
// Seeds: the events of the docs and a few of the tables' edges.
func FuzzSchemaAndDecoderAgree(f *testing.F) {
	s, py := newSchemaSet(f), newSchemaSetWith(f, pythonRegexp)
	types := Types()
	typeIndex := func(typ string) uint8 {
		return uint8(slices.IndexFunc(types, func(ti TypeInfo) bool { return ti.Name == typ }))
	}
	for _, ex := range docExamples(f) {
		if classify(ex.body) != kindEvent {
			continue
		}
		var head struct{ Type string }
		if err := json.Unmarshal([]byte(ex.body), &head); err != nil {
			f.Fatal(err)
		}
		f.Add(typeIndex(head.Type), []byte(ex.body), uint8(0), "", []byte(nil), false)
	}
	f.Add(typeIndex(tRC), []byte(mkEvent(tRC, `{"topic":"o","partitions":[0,1.0],"preferred_leader":1}`)), uint8(2), "Topic", []byte(`"o"`), false)
	f.Add(typeIndex(tBO), []byte(mkEvent(tBO, `{"broker":1}`)), uint8(1), "expiresat", []byte(`"2026-11-29t10:00:00.5+01:00"`), false)
	f.Add(typeIndex(tBO), []byte(mkEvent(tBO, `{"broker":1,"topics":["a"]}`, `"datacontenttype":"application/json; a=\"b\""`)), uint8(1), "x", []byte(`"text"`), false)
	f.Add(typeIndex(tLD), []byte(mkEvent(tLD, `{"broker":1,"from_dir":"/a"}`)), uint8(2), "partition", []byte(`3`), true)
	f.Add(typeIndex(tLD), []byte(mkEvent(tLD, `{"broker":1,"to_dir":"/a/b"}`)), uint8(2), "to_dir", []byte(`"/a/.."`), false)
	f.Add(typeIndex(tBA), []byte(mkEvent(tBA, `{"brokers":[4,5]}`)), uint8(2), "broker", []byte(`4`), false)
	f.Add(typeIndex(tBA), []byte(mkEvent(tBA, `{"broker":4}`)), uint8(2), "brokers", []byte(`[5,5.0]`), true)
	f.Add(typeIndex(tBF), []byte(mkEvent(tBF, `{"broker":3,"rack":"a"}`)), uint8(2), "rack", []byte(`"a\u0085"`), false)
	f.Add(typeIndex(tPO), []byte(mkEvent(tPO, `{"topic":"o"}`)), uint8(2), "partitions", []byte(`[0,1]`), false)
	f.Add(typeIndex(tPO), []byte(mkEvent(tPO, `{"topic":"o","partitions":[1]}`)), uint8(2), "topic", []byte(`""`), true)
	f.Add(typeIndex(tCP), []byte(mkEvent(tCP, `{"reason":"r"}`)), uint8(2), "until", []byte(`"2026-12-04T18:00:00.5+01:00"`), false)
	f.Add(typeIndex(tCP), []byte(mkEvent(tCP, `{"reason":"r","until":"2026-12-04T18:00:00Z"}`)), uint8(2), "reason", []byte(`"\u3000 "`), true)
	f.Add(typeIndex(tCR), []byte(mkEvent(tCR, `{}`)), uint8(2), "until", []byte(`null`), false)
	f.Add(typeIndex(tCP), []byte(mkEvent(tCP, `{"reason":"r"}`)), uint8(2), "until", []byte(`"2026-12-04t18:00:00z"`), false)
	f.Add(typeIndex(tCP), []byte(mkEvent(tCP, `{"reason":"r"}`)), uint8(2), "until", []byte(`"2026-12-04T9:00:00Z"`), true)
	f.Add(typeIndex(tOC), []byte(mkEvent(tOC, `{"id":"bd-2"}`)), uint8(2), "id", []byte(`"bd.2"`), false)
	f.Add(typeIndex(tOC), []byte(mkEvent(tOC, `{"id":"bd-2"}`)), uint8(2), "id", []byte(`null`), true)
	f.Add(typeIndex(tOC), []byte(mkEvent(tOC, `{"reason":"r"}`)), uint8(2), "id", []byte(`"`+strings.Repeat("i", MaxIDLength)+`"`), false)

	f.Fuzz(func(t *testing.T, typ uint8, body []byte, where uint8, name string, value []byte, binary bool) {
		ti := types[int(typ)%len(types)].Name
		body = setMember(body, where%3, name, value)
		subject := Subject("local", ti)
		ref, h := eventSchema(ti), Header(nil)
		if binary {
			var env struct{ Data json.RawMessage }
			if json.Unmarshal(body, &env) != nil || env.Data == nil {
				return
			}
			body, ref, h = env.Data, dataSchema(ti), binaryHeader(ti)
		}
		schemaErr := s.validate(t, ref, body)
		if pyErr := py.validate(t, ref, body); (pyErr == nil) != (schemaErr == nil) {
			t.Fatalf("the schema %s and its Python reading disagree on:\n%s\nschema: %v\nPython: %v", ref, body, schemaErr, pyErr)
		}
		_, decodeErr := Decode(subject, h, body, schemaDecodeOptions)
		switch {
		case schemaErr != nil && decodeErr == nil:
			t.Fatalf("the schema %s rejects what Decode takes:\n%s\nschema: %v", ref, body, schemaErr)
		case schemaErr == nil && decodeErr != nil && !schemaBlind(decodeErr):
			t.Fatalf("Decode rejects what the schema %s takes, for a rule not in schemaBlindRules:\n%s\nDecode: %v", ref, body, decodeErr)
		}
	})
}

// schemaBlind reports whether each of the reasons of a rejection is a rule of
// schemaBlindRules.
func schemaBlind(err error) bool {
	for _, line := range strings.Split(err.Error(), "\n") {
		if !slices.ContainsFunc(slices.Collect(maps.Values(schemaBlindRules)), func(r schemaBlindRule) bool {
			return slices.ContainsFunc(r.says, func(say string) bool { return strings.Contains(line, say) })
		}) {
			return false
		}
	}
	return true
}

// setMember sets the member name to the raw JSON value in the event body (where 1) or in
// its data (where 2); where 0, a body that is not a JSON object, or a value that is not
// JSON leave the body as it is.
func setMember(body []byte, where uint8, name string, value []byte) []byte {
	if where == 0 || !json.Valid(value) {
		return body
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return body
	}
	target := top
	if where == 2 {
		if json.Unmarshal(top["data"], &target) != nil || target == nil {
			return body
		}
	}
	target[name] = value
	if where == 2 {
		data, err := json.Marshal(target)
		if err != nil {
			return body
		}
		top["data"] = data
	}
	out, err := json.Marshal(top)
	if err != nil {
		return body
	}
	return out
}

// Each case of the tables has its own name (a subtest of a repeated name would hide which
// one failed) and a known type.
func TestSchemaTablesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range slices.Concat(invalidEvents, validEvents) {
		if seen[tc.name] {
			t.Errorf("two cases named %q", tc.name)
		}
		seen[tc.name] = true
		if !KnownType(tc.typ) {
			t.Errorf("%s: unknown type %q", tc.name, tc.typ)
		}
	}
}
