package check

import (
	"reflect"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/config"
)

// EnvPrefix starts the environment variables that override the worker's configuration:
// KAFKAMENDER_ and the key's YAML path, upper-cased, with "." as "_" (nats.url is
// KAFKAMENDER_NATS_URL).
const EnvPrefix = "KAFKAMENDER_"

// ConfigPaths returns the YAML path of every key of the worker configuration that has one
// value (not the keys under a map, such as clusters.<name>, or a list of mappings, such as
// alertmanager.rules), sorted.
func ConfigPaths() []string {
	var paths []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			path := prefix + name
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft.PkgPath() == reflect.TypeFor[config.Config]().PkgPath():
				walk(ft, path+".")
			case ft.Kind() == reflect.Map:
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			default:
				paths = append(paths, path)
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	slices.Sort(paths)
	return paths
}

// EnvName returns the environment variable that overrides the configuration key at path.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}
