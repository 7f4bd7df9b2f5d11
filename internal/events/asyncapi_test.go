package events

// docs/asyncapi.yaml: its references resolve, it names the subjects, streams, event types
// and schemas of this package, its examples validate and decode, and (without -short) it
// is a valid AsyncAPI 3.0.0 document by the official JSON Schema of the specification.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// schemaFormat is the schemaFormat of every payload and headers schema of the document.
const schemaFormat = "application/schema+json;version=draft-2020-12"

// asyncAPI reads docs/asyncapi.yaml as plain data (maps, lists, strings, numbers).
func asyncAPI(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(docsDir(t), "asyncapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/asyncapi.yaml: %v", err)
	}
	return doc
}

// jsonPointer resolves the JSON pointer ptr ("/components/messages/result") in doc.
func jsonPointer(doc any, ptr string) (any, error) {
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not in an object", ptr, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("%s: no %q", ptr, tok)
		}
	}
	return cur, nil
}

// yamlObject returns the object at ptr of doc, following a "$ref" to a local pointer.
func yamlObject(t testing.TB, doc any, ptr string) map[string]any {
	t.Helper()
	v, err := jsonPointer(doc, ptr)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", ptr)
	}
	if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
		return yamlObject(t, doc, ref[1:])
	}
	return m
}

func strField(m map[string]any, key string) string { s, _ := m[key].(string); return s }

// allRefs lists every "$ref" of v with where it is.
func allRefs(v any, where string) (out [][2]string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if ref, ok := v[k].(string); ok && k == "$ref" {
				out = append(out, [2]string{where, ref})
				continue
			}
			out = append(out, allRefs(v[k], where+"/"+k)...)
		}
	case []any:
		for i, e := range v {
			out = append(out, allRefs(e, fmt.Sprintf("%s/%d", where, i))...)
		}
	}
	return out
}

// resolveFileRef checks that ref ("schemas/x.json", "x.json#/$defs/y"), relative to the
// directory dir, names a file that exists and, with a fragment, an object in it.
func resolveFileRef(dir, ref string) (string, error) {
	file, frag, _ := strings.Cut(ref, "#")
	path := filepath.Join(dir, filepath.FromSlash(file))
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if frag != "" {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		if _, err := jsonPointer(doc, frag); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
	}
	return path, nil
}

// Every $ref of docs/asyncapi.yaml resolves, within the document or to a file, and every
// file of docs/schemas is referenced from it; every $ref of the schemas resolves too.
func TestAsyncAPIReferences(t *testing.T) {
	doc := asyncAPI(t)
	docs := docsDir(t)
	referenced := map[string]bool{}
	all := allRefs(doc, "")
	if len(all) == 0 {
		t.Fatal("docs/asyncapi.yaml has no $ref")
	}
	for _, r := range all {
		where, ref := r[0], r[1]
		if ptr, ok := strings.CutPrefix(ref, "#"); ok {
			if _, err := jsonPointer(doc, ptr); err != nil {
				t.Errorf("%s: $ref %s: %v", where, ref, err)
			}
			continue
		}
		path, err := resolveFileRef(docs, ref)
		if err != nil {
			t.Errorf("%s: $ref %s: %v", where, ref, err)
			continue
		}
		referenced[filepath.Base(path)] = true
	}
	files, err := filepath.Glob(filepath.Join(docs, "schemas", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/schemas/*.json: %v", err)
	}
	s := newSchemaSet(t)
	for _, path := range files {
		name := filepath.Base(path)
		if !referenced[name] {
			t.Errorf("schemas/%s is not referenced from docs/asyncapi.yaml", name)
		}
		sch := rawSchema(t, name)
		if got := sch["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("schemas/%s: $schema %v, want draft 2020-12", name, got)
		}
		for _, r := range allRefs(sch, "") {
			if strings.HasPrefix(r[1], "#") {
				if _, err := jsonPointer(sch, r[1][1:]); err != nil {
					t.Errorf("schemas/%s%s: $ref %s: %v", name, r[0], r[1], err)
				}
			} else if _, err := resolveFileRef(filepath.Dir(path), r[1]); err != nil {
				t.Errorf("schemas/%s%s: $ref %s: %v", name, r[0], r[1], err)
			}
		}
		s.get(t, "schemas/"+name) // compiles, with its references
	}
}

// schemaRef returns the file a message's payload or headers schema references, checking
// that it is a JSON Schema draft 2020-12 by its schemaFormat.
func schemaRef(t testing.TB, msg map[string]any, member string) string {
	t.Helper()
	m, ok := msg[member].(map[string]any)
	if !ok {
		return ""
	}
	if got := strField(m, "schemaFormat"); got != schemaFormat {
		t.Errorf("message %s: %s schemaFormat %q, want %q", strField(msg, "name"), member, got, schemaFormat)
	}
	sch, _ := m["schema"].(map[string]any)
	ref := strField(sch, "$ref")
	if ref == "" {
		t.Errorf("message %s: %s is no $ref to a file of schemas/", strField(msg, "name"), member)
	}
	return ref
}

// channelParams returns the {parameters} of a channel address.
func channelParams(address string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(address, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

func fillAddress(address string, values map[string]string) string {
	for k, v := range values {
		address = strings.ReplaceAll(address, "{"+k+"}", v)
	}
	return address
}

// The document's channels are the subjects of this package, its event messages are the
// event types of Types(), its streams are this package's, and its operations name
// channels and messages of those channels.
func TestAsyncAPIMatchesContract(t *testing.T) {
	doc := asyncAPI(t)
	if doc["asyncapi"] != "3.0.0" {
		t.Errorf("asyncapi: %v, want 3.0.0", doc["asyncapi"])
	}
	if got := strField(yamlObject(t, doc, "/servers/nats"), "protocol"); got != "nats" {
		t.Errorf("server nats: protocol %q", got)
	}

	channels := yamlObject(t, doc, "/channels")
	for _, tc := range []struct {
		channel string
		values  map[string]string
		want    string
		stream  string   // named in the description
		schemas []string // of its messages' payloads, in order
	}{
		{"events", map[string]string{"cluster": "local", "type": TypeBrokerOverloaded}, Subject("local", TypeBrokerOverloaded), EventsStream, nil},
		{"results", map[string]string{"id": "a1b2"}, ResultSubject("a1b2"), ResultsStream, []string{resultSchema}},
		{"progress", map[string]string{"id": "a1b2"}, ProgressSubject("a1b2"), "", []string{progressSchema}},
		{"deadLetters", map[string]string{"cluster": "local"}, DeadSubject("local"), DeadStream, []string{deadLetterSchema}},
	} {
		t.Run(tc.channel, func(t *testing.T) {
			ch := yamlObject(t, doc, "/channels/"+tc.channel)
			address := strField(ch, "address")
			if got := fillAddress(address, tc.values); got != tc.want {
				t.Errorf("address %q gives %q, want %q", address, got, tc.want)
			}
			params, _ := ch["parameters"].(map[string]any)
			if got, want := sortedKeys(params), channelParams(address); !slices.Equal(got, want) {
				t.Errorf("parameters %v, want those of the address %v", got, want)
			}
			if tc.stream != "" && !strings.Contains(strField(ch, "description"), tc.stream) {
				t.Errorf("the description does not name the stream %s", tc.stream)
			}
			if tc.schemas == nil {
				return
			}
			var got []string
			messages, _ := ch["messages"].(map[string]any)
			for _, name := range sortedKeys(messages) {
				got = append(got, schemaRef(t, yamlObject(t, doc, "/channels/"+tc.channel+"/messages/"+name), "payload"))
			}
			if !slices.Equal(got, tc.schemas) {
				t.Errorf("message payloads %v, want %v", got, tc.schemas)
			}
		})
	}
	if got := sortedKeys(channels); !slices.Equal(got, []string{"deadLetters", "events", "progress", "results"}) {
		t.Errorf("channels %v", got)
	}
	dead := yamlObject(t, doc, "/channels/deadLetters/parameters/cluster")
	if !strings.Contains(fmt.Sprint(dead), DeadUnknownCluster) {
		t.Errorf("the dead-letter cluster parameter does not mention %s", DeadUnknownCluster)
	}

	// The events channel: one message per event type, named as the type, its payload the
	// type's event schema; the type parameter lists the types.
	var types []any
	for _, ti := range Types() {
		types = append(types, ti.Name)
	}
	if got := yamlObject(t, doc, "/channels/events/parameters/type")["enum"]; !slices.Equal(got.([]any), types) {
		t.Errorf("events: the type parameter's enum %v, want %v", got, types)
	}
	msgs := yamlObject(t, doc, "/channels/events/messages")
	var names []any
	for _, key := range sortedKeys(msgs) {
		msg := yamlObject(t, doc, "/channels/events/messages/"+key)
		name := strField(msg, "name")
		names = append(names, name)
		if got, want := schemaRef(t, msg, "payload"), eventSchema(name); got != want {
			t.Errorf("events: message %s: payload %s, want %s", name, got, want)
		}
		if got := schemaRef(t, msg, "headers"); got != eventHeadersSchema {
			t.Errorf("events: message %s: headers %s, want %s", name, got, eventHeadersSchema)
		}
		if got := strField(msg, "contentType"); got != ContentTypeCloudEventsJSON {
			t.Errorf("events: message %s: contentType %q, want %q", name, got, ContentTypeCloudEventsJSON)
		}
	}
	slices.SortFunc(names, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	slices.SortFunc(types, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	if !slices.Equal(names, types) {
		t.Errorf("events: messages %v, want one per event type %v", names, types)
	}
	if got := schemaRef(t, yamlObject(t, doc, "/channels/deadLetters/messages/deadLetter"), "headers"); got != deadLetterHeadersSchema {
		t.Errorf("deadLetters: headers %s, want %s", got, deadLetterHeadersSchema)
	}

	// Operations, from the worker's point of view.
	actions := map[string][]string{}
	for name, op := range yamlObject(t, doc, "/operations") {
		op := op.(map[string]any)
		action := strField(op, "action")
		chRef := strField(op["channel"].(map[string]any), "$ref")
		channel, ok := strings.CutPrefix(chRef, "#/channels/")
		if !ok || channels[channel] == nil {
			t.Errorf("operation %s: channel %q is not a channel of the document", name, chRef)
			continue
		}
		actions[channel] = append(actions[channel], action)
		list, _ := op["messages"].([]any)
		if len(list) == 0 {
			t.Errorf("operation %s: no messages", name)
		}
		for _, m := range list {
			ref := strField(m.(map[string]any), "$ref")
			if !strings.HasPrefix(ref, "#/channels/"+channel+"/messages/") {
				t.Errorf("operation %s: message %s is not one of channel %s", name, ref, channel)
			} else if _, err := jsonPointer(doc, ref[1:]); err != nil {
				t.Errorf("operation %s: %v", name, err)
			}
		}
	}
	for channel, want := range map[string][]string{
		"events": {"receive", "send"}, "results": {"send"}, "progress": {"send"}, "deadLetters": {"send"},
	} {
		got := actions[channel]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("operations on %s: %v, want %v (the worker's point of view)", channel, got, want)
		}
	}
}

// Every example of the document's messages validates against the message's schemas and
// reads as the Go side reads it.
func TestAsyncAPIExamples(t *testing.T) {
	doc := asyncAPI(t)
	s := newSchemaSet(t)
	messages := yamlObject(t, doc, "/components/messages")
	count := 0
	for _, key := range sortedKeys(messages) {
		msg := yamlObject(t, doc, "/components/messages/"+key)
		name := strField(msg, "name")
		payloadRef, headersRef := schemaRef(t, msg, "payload"), schemaRef(t, msg, "headers")
		examples, _ := msg["examples"].([]any)
		if len(examples) == 0 {
			t.Errorf("message %s has no example", name)
		}
		for i, e := range examples {
			e := e.(map[string]any)
			t.Run(fmt.Sprintf("%s/%d-%s", name, i, strField(e, "name")), func(t *testing.T) {
				count++
				payload := toJSON(t, e["payload"])
				if err := s.validate(t, payloadRef, payload); err != nil {
					t.Errorf("payload: %v\n%s", err, payload)
				}
				headers, _ := e["headers"].(map[string]any)
				if headers != nil {
					if headersRef == "" {
						t.Fatal("headers, but the message has no headers schema")
					}
					if err := s.validate(t, headersRef, toJSON(t, headers)); err != nil {
						t.Errorf("headers: %v", err)
					}
				}
				switch {
				case KnownType(name):
					if strField(headers, "Nats-Msg-Id") != "" && headers["Nats-Msg-Id"] != e["payload"].(map[string]any)["id"] {
						t.Errorf("Nats-Msg-Id %v is not the event id", headers["Nats-Msg-Id"])
					}
					checkExample(t, s, kindEvent, payload)
				case payloadRef == resultSchema:
					checkExample(t, s, kindResult, payload)
				case payloadRef == progressSchema:
					checkExample(t, s, kindProgress, payload)
				case payloadRef == deadLetterSchema:
					// The body of a dead letter is the original event's, published on the
					// original subject.
					subject := strField(headers, HeaderOriginalSubject)
					cluster, typ, err := parseSubject(subject)
					if err != nil {
						t.Fatalf("%s: %v", HeaderOriginalSubject, err)
					}
					if cluster != "local" || DeadSubject(cluster) != fillAddress(strField(yamlObject(t, doc, "/channels/deadLetters"), "address"), map[string]string{"cluster": cluster}) {
						t.Errorf("example of cluster %q", cluster)
					}
					if err := s.validate(t, eventSchema(typ), payload); err != nil {
						t.Errorf("the original event: %v", err)
					}
					if _, err := Decode(subject, nil, payload, schemaDecodeOptions); err != nil {
						t.Errorf("the original event: %v", err)
					}
				default:
					t.Fatalf("message %s: no check for its examples", name)
				}
			})
		}
	}
	if count == 0 {
		t.Fatal("no examples in docs/asyncapi.yaml")
	}
}

// The AsyncAPI specification's own JSON Schemas come from its npm package @asyncapi/specs,
// at a pinned version whose tarball's integrity is checked, into the git-ignored .cache
// (as the stack resolves Kafka's jars from Maven Central into it): nothing third-party is
// committed.
const (
	asyncAPISpecsPackage    = "@asyncapi/specs"
	asyncAPISpecsVersion    = "6.11.1"
	asyncAPISpecsTarball    = "https://registry.npmjs.org/@asyncapi/specs/-/specs-" + asyncAPISpecsVersion + ".tgz"
	asyncAPISpecsIntegrity  = "sha512-A3WBLqAKGoJ2+6FWFtpjBlCQ1oFCcs4GxF7zsIGvNqp/klGUHjlA3aAcZ9XMMpLGE8zPeYDz2x9FmO6DSuKraQ=="
	asyncAPISchemaInTarball = "package/schemas/3.0.0.json"
	asyncAPISchemaID        = "http://asyncapi.com/definitions/3.0.0/asyncapi.json"
)

// officialAsyncAPISchema returns the AsyncAPI 3.0.0 JSON Schema, from the cache or, the
// first time, from the npm registry (its tarball over HTTPS: no npm needed).
func officialAsyncAPISchema(t testing.TB) []byte {
	t.Helper()
	dir := filepath.Join(repoRoot(t), ".cache", "asyncapi-specs-"+asyncAPISpecsVersion)
	cached := filepath.Join(dir, "3.0.0.json")
	if raw, err := os.ReadFile(cached); err == nil {
		return raw
	}
	tarball, err := fetchTarball(asyncAPISpecsTarball)
	if err != nil {
		t.Fatalf("%s@%s: %v", asyncAPISpecsPackage, asyncAPISpecsVersion, err)
	}
	sum := sha512.Sum512(tarball)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != asyncAPISpecsIntegrity {
		t.Fatalf("%s@%s: integrity %s, want %s", asyncAPISpecsPackage, asyncAPISpecsVersion, got, asyncAPISpecsIntegrity)
	}
	raw, err := fileInTarball(tarball, asyncAPISchemaInTarball)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached+".tmp", raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cached+".tmp", cached); err != nil {
		t.Fatal(err)
	}
	return raw
}

// fetchTarball downloads a package tarball, retrying a few times (registries hiccup).
func fetchTarball(url string) ([]byte, error) {
	client := &http.Client{Timeout: time.Minute}
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 2 * time.Second) // backoff between attempts, not a wait for a condition
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		if err == nil {
			return body, nil
		}
		last = err
	}
	return nil, last
}

func fileInTarball(tgz []byte, name string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("read tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no %s in the tarball", name)
		}
		if err != nil {
			return nil, fmt.Errorf("read tarball: %w", err)
		}
		if h.Name == name {
			return io.ReadAll(tr)
		}
	}
}

// docs/asyncapi.yaml is valid by the official AsyncAPI 3.0.0 JSON Schema; a document
// broken on purpose is not (the validation is not vacuous).
func TestAsyncAPIValidByOfficialSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the AsyncAPI specification's JSON Schema from the npm registry (once; then cached in .cache)")
	}
	raw := officialAsyncAPISchema(t)
	spec, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("AsyncAPI 3.0.0 schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{}) // everything is in the bundled schema: never fetch
	if err := c.AddResource(asyncAPISchemaID, spec); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(asyncAPISchemaID)
	if err != nil {
		t.Fatalf("compile the AsyncAPI 3.0.0 schema: %v", err)
	}
	validate := func(doc map[string]any) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(toJSON(t, doc)))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
	if err := validate(asyncAPI(t)); err != nil {
		t.Errorf("docs/asyncapi.yaml: %v", err)
	}
	for name, breakIt := range map[string]func(doc map[string]any){
		"version":   func(doc map[string]any) { doc["asyncapi"] = "3.0.1" },
		"action":    func(doc map[string]any) { yamlObject(t, doc, "/operations/receiveEvents")["action"] = "subscribe" },
		"no info":   func(doc map[string]any) { delete(doc, "info") },
		"2.x field": func(doc map[string]any) { yamlObject(t, doc, "/channels/events")["subscribe"] = map[string]any{} },
	} {
		doc := asyncAPI(t)
		breakIt(doc)
		if err := validate(doc); err == nil {
			t.Errorf("a document broken on purpose (%s) validates", name)
		}
	}
}

// noLoader loads nothing: a reference out of the bundled schema is an error, not a fetch.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) { return nil, fmt.Errorf("not loading %s", url) }
