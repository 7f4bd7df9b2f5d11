package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envPrefix starts the name of every environment variable that sets a field of the
// configuration: the field at YAML path a.b.c is set by KAFKAMENDER_A_B_C.
const envPrefix = "KAFKAMENDER_"

// hiddenValue replaces the value of a variable in validation errors.
const hiddenValue = "<hidden>"

// envName is the environment variable that sets the field at a YAML path: envPrefix,
// then the path upper-cased, with every character other than A-Z and 0-9 (the dots
// between keys, the '-' of a cluster name) turned into '_'. envName("nats.url") is
// KAFKAMENDER_NATS_URL; envName("clusters.prod-eu.strategy") is
// KAFKAMENDER_CLUSTERS_PROD_EU_STRATEGY.
func envName(path string) string {
	return envPrefix + envSegment(path)
}

func envSegment(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		}
		return '_'
	}, s)
}

// WithoutOverrides returns environ ("NAME=value" entries) less the variables that would
// override configuration (KAFKAMENDER_ ones other than the test hooks): the environment of
// a worker whose configuration must come from its file alone, as tests and the demo start.
func WithoutOverrides(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || nonConfigEnv(name) {
			out = append(out, kv)
		}
	}
	return out
}

// nonConfigEnv reports whether name is a KAFKAMENDER_ variable that is not
// configuration, which ParseEnv leaves alone rather than calling it unknown: the
// fault-test hooks of the worker, and the variables Kubernetes gives every pod for each
// Service of its namespace (service links), which a Service named kafkamender or
// kafkamender-<anything> makes KAFKAMENDER_ ones.
func nonConfigEnv(name string) bool {
	switch name {
	case "KAFKAMENDER_PAUSE_AT", // worker.PauseEnv: stop the worker at a handler step
		"KAFKAMENDER_LOGDIR_KILL_AT": // logdir.KillEnv: kill "worker logdir" at a step
		return true
	}
	return serviceLinkRE.MatchString(name)
}

// serviceLinkRE matches the variables of a Kubernetes service link: <SVC>_SERVICE_HOST,
// <SVC>_SERVICE_PORT[_<PORT NAME>], <SVC>_PORT and <SVC>_PORT_<port>_<PROTOCOL>[_PROTO|_PORT|_ADDR].
// No configuration path ends that way.
var serviceLinkRE = regexp.MustCompile(`^KAFKAMENDER_(?:[A-Z0-9_]*_)?(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT(?:_[0-9]+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)?)$`)

// setting is one field of the configuration, found by walking the yaml tags of Config.
type setting struct {
	// path is the field's YAML path: nats.url, clusters.local.strategy,
	// alertmanager.rules[0].type; in a schema, clusters.<name>.strategy and
	// alertmanager.rules[].type.
	path string
	// env is the environment variable named after path; "" inside a list, whose
	// items have no names.
	env string
	// settable: the environment can set the field (a scalar or a list of strings, not
	// inside a list).
	settable bool
	// kind names the field's type as docs/configuration.md does.
	kind string
	// v is the field: settable in a walk of a configuration, a zero value in a schema.
	v reflect.Value
}

// fieldWalker lists the settings of a configuration, or of the Config type (a schema,
// with one entry named <name> in each mapping and one item [] in each list).
type fieldWalker struct {
	schema bool
	out    []setting
}

// configSettings lists the settings of cfg. A mapping entry with nothing under it (a
// nil *Cluster) gets a zero value first, as setDefaults would give it, so that the
// environment can set its fields.
func configSettings(cfg *Config) []setting {
	w := &fieldWalker{}
	w.structFields(reflect.ValueOf(cfg).Elem(), "", "KAFKAMENDER", false)
	return w.out
}

// schemaSettings lists the settings of the Config type, cluster fields as
// clusters.<name>.field (env KAFKAMENDER_CLUSTERS_<NAME>_FIELD) and rule fields as
// alertmanager.rules[].field.
func schemaSettings() []setting {
	w := &fieldWalker{schema: true}
	w.structFields(reflect.New(reflect.TypeFor[Config]()).Elem(), "", "KAFKAMENDER", false)
	return w.out
}

func (w *fieldWalker) structFields(v reflect.Value, path, env string, inList bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") && f.Type.Kind() == reflect.Struct {
			w.structFields(v.Field(i), path, env, inList)
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name) // as yaml.v3 names it
		}
		fieldEnv := ""
		if !inList {
			fieldEnv = env + "_" + envSegment(key)
		}
		w.value(v.Field(i), joinKey(path, key), fieldEnv, inList)
	}
}

func (w *fieldWalker) value(v reflect.Value, path, env string, inList bool) {
	t := v.Type()
	if kind := settableKind(t); kind != "" {
		w.out = append(w.out, setting{path: path, env: env, settable: !inList, kind: kind, v: v})
		return
	}
	switch {
	case t.Kind() == reflect.Struct:
		w.structFields(v, path, env, inList)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String &&
		t.Elem().Kind() == reflect.Pointer && t.Elem().Elem().Kind() == reflect.Struct:
		// Entries named by the user (clusters): their fields are named after the key.
		w.out = append(w.out, setting{path: path, env: env, kind: "mapping", v: v})
		if w.schema {
			entryEnv := ""
			if env != "" {
				entryEnv = env + "_<NAME>"
			}
			w.structFields(reflect.New(t.Elem().Elem()).Elem(), path+".<name>", entryEnv, inList)
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			entry := v.MapIndex(k)
			if entry.IsNil() {
				entry = reflect.New(t.Elem().Elem())
				v.SetMapIndex(k, entry)
			}
			entryEnv := ""
			if env != "" {
				entryEnv = env + "_" + envSegment(k.String())
			}
			w.structFields(entry.Elem(), path+"."+k.String(), entryEnv, inList)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		// Items have no names: nothing in them can be set from the environment.
		w.out = append(w.out, setting{path: path, env: env, kind: "list of mappings", v: v})
		if w.schema {
			w.structFields(reflect.New(t.Elem()).Elem(), path+"[]", "", true)
			return
		}
		for i := range v.Len() {
			w.structFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i), "", true)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		w.out = append(w.out, setting{path: path, env: env, kind: "mapping of strings", v: v})
	case t.Kind() == reflect.Map && settableKind(t.Key()) == "integer" && settableKind(t.Elem()) == "integer":
		w.out = append(w.out, setting{path: path, env: env, kind: "mapping of integers", v: v})
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Slice && t.Elem().Elem().Kind() == reflect.String:
		w.out = append(w.out, setting{path: path, env: env, kind: "mapping of lists of strings", v: v})
	default:
		w.out = append(w.out, setting{path: path, env: env, kind: t.String(), v: v})
	}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isDuration(t reflect.Type) bool { return t == reflect.TypeFor[time.Duration]() }

// settableKind names the type of a field the environment can set, or returns "".
func settableKind(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Secret]():
		return "secret"
	case isDuration(t):
		return "duration"
	case t.Kind() == reflect.Pointer:
		return settableKind(t.Elem())
	case t.Kind() == reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "list of strings"
		}
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return ""
}

// setFromEnv sets v, of a type settableKind names, from the text s. Its errors never
// show s: it may be a secret.
func setFromEnv(v reflect.Value, s string) error {
	t := v.Type()
	switch {
	case isDuration(t):
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("want a duration such as 10s or 5m")
		}
		v.SetInt(int64(d))
		return nil
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := setFromEnv(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case t.Kind() == reflect.Slice:
		items := strings.Split(s, ",")
		list := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			item = strings.TrimSpace(item)
			if item == "" {
				return fmt.Errorf("want a comma-separated list, item %d is empty", i)
			}
			list.Index(i).SetString(item)
		}
		v.Set(list)
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("want true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return fmt.Errorf("want an integer: %w", numErr(err))
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			return fmt.Errorf("want an integer of 0 or more: %w", numErr(err))
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return fmt.Errorf("want a number: %w", numErr(err))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("want a finite number")
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("cannot set a %s", t) // settableKind said no
	}
	return nil
}

// numErr is the cause of a strconv error (strconv.ErrSyntax, strconv.ErrRange) without
// the text that failed, which *strconv.NumError shows.
func numErr(err error) error {
	if ne, ok := errors.AsType[*strconv.NumError](err); ok {
		return ne.Err
	}
	return err
}

// envSet is one variable applied to a configuration.
type envSet struct {
	name string
	path string
	// hide are the texts validation errors about the field must not show (the value, and
	// each item of a list); nil for values that cannot be secrets (numbers, durations,
	// booleans).
	hide []string
}

// applyEnv sets the fields of cfg that environ's KAFKAMENDER_ variables name, and
// returns what it applied, in the order of the variables' names. environ holds
// "name=value" entries, as os.Environ returns them; of a name given twice, the last
// counts. A variable set to nothing (or white space) is left out, but its name must still
// be one applyEnv knows.
func applyEnv(cfg *Config, environ []string) ([]envSet, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !nonConfigEnv(name) {
			vars[name] = value
		}
	}
	if len(vars) == 0 {
		return nil, nil
	}

	byEnv := map[string][]setting{} // the fields the environment can set
	other := map[string]setting{}   // named fields it cannot set, for a better error
	for _, s := range configSettings(cfg) {
		switch {
		case s.settable:
			byEnv[s.env] = append(byEnv[s.env], s)
		case s.env != "":
			other[s.env] = s
		}
	}

	var applied []envSet
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		targets := byEnv[name]
		switch {
		case len(targets) > 1:
			paths := make([]string, len(targets))
			for i, t := range targets {
				paths[i] = t.path
			}
			errs = append(errs, &envError{name: name, err: fmt.Errorf("ambiguous: names %s (rename one, or set these in the file)", strings.Join(paths, " and "))})
			continue
		case len(targets) == 0:
			errs = append(errs, &envError{name: name, err: unknownEnv(name, other)})
			continue
		}
		target := targets[0]
		value := strings.TrimSpace(vars[name])
		if value == "" {
			continue
		}
		if err := setFromEnv(target.v, value); err != nil {
			errs = append(errs, &envError{name: name, path: target.path, err: err})
			continue
		}
		set := envSet{name: name, path: target.path}
		switch target.kind {
		case "string", "secret":
			set.hide = []string{value}
		case "list of strings":
			set.hide = []string{value}
			for i := range target.v.Len() {
				set.hide = append(set.hide, target.v.Index(i).String())
			}
		}
		applied = append(applied, set)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return applied, nil
}

func unknownEnv(name string, other map[string]setting) error {
	if s, ok := other[name]; ok {
		return fmt.Errorf("%s is a %s, which cannot be set from the environment", s.path, s.kind)
	}
	if strings.HasPrefix(name, envName("clusters")+"_") {
		return errors.New("names no setting of a cluster in the configuration file (the environment can set the fields of a cluster, not add one)")
	}
	return errors.New("names no setting that can be set from the environment")
}

// envError is a problem with an environment variable. It never shows the variable's
// value.
type envError struct {
	name string
	path string // the field it sets; "" when none
	err  error
}

func (e *envError) Error() string {
	if e.path == "" {
		return e.name + ": " + e.err.Error()
	}
	return e.name + " (" + e.path + "): " + e.err.Error()
}

func (e *envError) Unwrap() error { return e.err }

// markEnv names the variable in the validation problems of fields it set, and hides its
// value in them.
func markEnv(p problems, applied []envSet) {
	for _, err := range p {
		fe, ok := err.(*fieldError)
		if !ok {
			continue
		}
		for _, set := range applied {
			if fe.path == set.path || strings.HasPrefix(fe.path, set.path+"[") {
				fe.env, fe.hide = set.name, set.hide
			}
		}
	}
}
