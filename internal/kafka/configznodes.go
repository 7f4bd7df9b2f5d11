package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"

	"github.com/go-zookeeper/zk"
)

// ConfigZnode is an entity's dynamic config in ZooKeeper mode, /config/brokers/<id> or
// /config/topics/<t>: {"version":1,"config":{"key":"value",…}}. It is decoded into a
// generic map so that a rewrite keeps every field and every other key as it was read
// (a broker's password configs are stored encoded: they must be written back byte for
// byte, which the API could not do).
type ConfigZnode struct {
	doc    map[string]any
	config map[string]any
}

// NewConfigZnode is the config of an entity that has none yet.
func NewConfigZnode() *ConfigZnode {
	config := map[string]any{}
	return &ConfigZnode{doc: map[string]any{"version": json.Number("1"), "config": config}, config: config}
}

// DecodeConfigZnode decodes a config znode. Every value of "config" must be a string, as
// Kafka writes them.
func DecodeConfigZnode(data []byte) (*ConfigZnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", truncate(data, 200), err)
	}
	if v, _ := doc["version"].(json.Number); v.String() != "1" {
		return nil, fmt.Errorf("decode %s: version %v, want 1", truncate(data, 200), doc["version"])
	}
	config, ok := doc["config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode %s: no config object", truncate(data, 200))
	}
	for k, v := range config {
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("decode %s: config %s is not a string", truncate(data, 200), k)
		}
	}
	return &ConfigZnode{doc: doc, config: config}, nil
}

// Get returns the value of key (nil: not set).
func (z *ConfigZnode) Get(key string) *string {
	v, ok := z.config[key].(string)
	if !ok {
		return nil
	}
	return &v
}

// Set sets key to *value, or removes it when value is nil.
func (z *ConfigZnode) Set(key string, value *string) {
	if value == nil {
		delete(z.config, key)
		return
	}
	z.config[key] = *value
}

// Encode renders the znode with every field and key it was read with.
func (z *ConfigZnode) Encode() ([]byte, error) { return json.Marshal(z.doc) }

func (z *ConfigZnode) clone() *ConfigZnode {
	doc := maps.Clone(z.doc)
	config := maps.Clone(z.config)
	doc["config"] = config
	return &ConfigZnode{doc: doc, config: config}
}

// EncodeConfigChange is the change notification that makes the brokers (and a ZooKeeper
// controller) reload an entity's config: {"version":2,"entity_path":"topics/<t>"} (version
// 2, understood since Kafka 0.10.1, as old as replication throttles).
func EncodeConfigChange(entityPath string) ([]byte, error) {
	return json.Marshal(struct {
		Version    int    `json:"version"`
		EntityPath string `json:"entity_path"`
	}{2, entityPath})
}

// configZnode is an entity's config znode as read: its data and version (-1: absent).
type configZnode struct {
	path    string
	version int32
	z       *ConfigZnode
}

// entityPath is the entity as config znodes and change notifications name it.
func (r resourceRef) entityPath() string {
	if r.entity == EntityBroker {
		return "brokers/" + r.name
	}
	return "topics/" + r.name
}

// readConfigZnodes reads the config znodes of refs' entities. An entity without one has no
// dynamic config; a topic without one does not exist when /brokers/topics/<t> does not
// either.
func readConfigZnodes(conn ZKReader, chroot string, refs []configRef) (dynamicConfigs, error) {
	out := dynamicConfigs{values: map[configRef]*string{}, missing: map[string]bool{}, hidden: map[configRef]bool{},
		znodes: map[resourceRef]*configZnode{}}
	for _, r := range refs {
		res := r.resource()
		if _, ok := out.znodes[res]; ok || out.missing[res.name] && res.entity == EntityTopic {
			continue
		}
		p := path.Join("/", chroot, "config", res.entityPath())
		data, stat, err := conn.Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			if res.entity == EntityTopic {
				tp := path.Join("/", chroot, "brokers", "topics", res.name)
				if _, _, err := conn.Get(tp); errors.Is(err, zk.ErrNoNode) {
					out.missing[res.name] = true
					continue
				} else if err != nil {
					return out, fmt.Errorf("read %s: %w", tp, err)
				}
			}
			out.znodes[res] = &configZnode{path: p, version: -1, z: NewConfigZnode()}
		case err != nil:
			return out, fmt.Errorf("read %s: %w", p, err)
		default:
			z, err := DecodeConfigZnode(data)
			if err != nil {
				return out, fmt.Errorf("%s: %w", p, err)
			}
			out.znodes[res] = &configZnode{path: p, version: stat.Version, z: z}
		}
	}
	for _, r := range refs {
		if cz := out.znodes[r.resource()]; cz != nil {
			if v := cz.z.Get(r.key); v != nil {
				out.values[r] = v
			}
		}
	}
	return out, nil
}

// writeConfigZnodes writes writes into the config znodes read in cur, with a change
// notification per entity, in one transaction fenced by w: each znode only if it still
// has the version read (created only if still absent). When one changed since, nothing is
// written and the error wraps errConfigChanged. It refuses (ErrKRaftController) when a
// KRaft controller owns the cluster: it would never see the notifications.
func writeConfigZnodes(ctx context.Context, conn ZKReader, chroot string, w FencedWriter, cur dynamicConfigs, writes []configWrite) error {
	if len(writes) == 0 {
		return nil
	}
	if err := CheckZKController(ctx, conn, chroot); err != nil {
		return err
	}
	byResource := map[resourceRef][]configWrite{}
	for _, wr := range writes {
		byResource[wr.ref.resource()] = append(byResource[wr.ref.resource()], wr)
	}
	resources := slices.SortedFunc(maps.Keys(byResource), func(a, b resourceRef) int {
		return cmp.Or(cmp.Compare(a.entity, b.entity), cmp.Compare(a.name, b.name))
	})
	var ops []any
	for _, res := range resources {
		cz := cur.znodes[res]
		if cz == nil {
			return fmt.Errorf("%s %s: its config znode was not read", res.entity, res.name)
		}
		z := cz.z.clone()
		for _, wr := range byResource[res] {
			z.Set(wr.ref.key, wr.value)
		}
		data, err := z.Encode()
		if err != nil {
			return err
		}
		if cz.version < 0 {
			ops = append(ops, &zk.CreateRequest{Path: cz.path, Data: data, Acl: zk.WorldACL(zk.PermAll)})
		} else {
			ops = append(ops, &zk.SetDataRequest{Path: cz.path, Data: data, Version: cz.version})
		}
		note, err := EncodeConfigChange(res.entityPath())
		if err != nil {
			return err
		}
		ops = append(ops, &zk.CreateRequest{Path: path.Join("/", chroot, "config", "changes", "config_change_"), Data: note,
			Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
	}
	if _, err := w.Multi(ctx, ops...); err != nil {
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("write config znodes: %w (%w)", errConfigChanged, err)
		}
		return fmt.Errorf("write config znodes: %w", err)
	}
	return nil
}
