package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// chunked is kv for values of any size over a kv whose writes are bounded (maxValue; a
// NATS message is at most the server's max_payload). A value that fits is stored as it
// is, under its key. A larger one is stored in chunks, each under a key no other write
// uses, <key>.chunks.<nonce>.<i>, and the key then holds a small head naming them (size,
// sha256). So the key stays the one revision-checked point: every write, of any size, is
// one compare-and-set of the key; chunks are written once, before the head that names
// them, and removed only after a head that no longer names them is written.
//
// A reader that finds chunks of the head it read gone (a writer replaced the value since)
// reads the head again: it gets the old value or the new one whole, never a mix.
//
// After a write of a key, the chunks of that key no head names any more are removed: those
// of the value it replaced, and those of a write that died between its chunks and its head
// (or lost the compare-and-set). (A write whole skips this when the same process's last
// write of the key was whole and left no chunks: see bare.) A chunk is removed only when
// it is older than the head just written (a lower revision): a writer whose chunks are
// older read the head before it moved, so its compare-and-set fails; the chunks of a
// writer that read the new head are newer, and stay.
//
// Storage: a value in chunks costs its size once (plus about 100 bytes a chunk) and a head
// of about 250 bytes for each revision the key's history keeps (16); the chunks of
// replaced values are removed without a trace (a purge of their subjects: no delete
// markers), so the history of a chunked key holds heads whose chunks are gone: earlier
// values of a chunked key are not kept. A value written whole costs its size for each
// revision the history keeps, as before.
type chunked struct {
	kv kv

	// bare holds the keys that, as far as this process knows, have no chunks: its last
	// write of the key was whole and the clean-up after it left none. A whole write of a
	// bare key skips the clean-up (a request to the server). Chunks a write of another
	// process left are found by this process's first write of the key, or by its next
	// write in chunks.
	mu   sync.Mutex
	bare map[string]bool
}

var _ kv = (*chunked)(nil)

// chunksToken separates a key from its chunk keys: <key>.chunks.<nonce>.<i>. Keys the
// layer is given are single tokens (cluster names), so chunk keys never collide with them.
const chunksToken = ".chunks."

// headPrefix starts every head, and no value written whole (an entry starts {"event":).
var headPrefix = []byte(`{"chunked":`)

// head is what a key holds when its value is in chunks.
type head struct {
	Chunked chunkRef `json:"chunked"`
	// Changes holds a string where an entry holds a list, so that a worker of a version
	// that does not know chunked values fails to decode the head, rather than taking it
	// for an empty entry.
	Changes string `json:"changes"`
}

type chunkRef struct {
	Nonce  string `json:"nonce"`
	Chunks int    `json:"chunks"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

func chunkKey(key, nonce string, i int) string {
	return key + chunksToken + nonce + "." + strconv.Itoa(i)
}

// errChunkGone: a chunk named by a head is not there (replaced since, or damaged).
var errChunkGone = errors.New("chunk gone")

// readTries bounds how often get reads a head again because a writer replaced its chunks.
const readTries = 10

func (c *chunked) get(ctx context.Context, key string) ([]byte, uint64, error) {
	var last uint64
	for try := 1; ; try++ {
		val, rev, err := c.kv.get(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		ref, ok, err := decodeHead(val)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: revision %d: %w", key, rev, err)
		}
		if !ok {
			return val, rev, nil
		}
		whole, err := c.read(ctx, key, ref)
		switch {
		case err == nil:
			return whole, rev, nil
		case !errors.Is(err, errChunkGone):
			return nil, 0, fmt.Errorf("%s: revision %d: %w", key, rev, err)
		case rev == last || try == readTries:
			// The head did not move, yet its chunks are gone.
			return nil, 0, fmt.Errorf("%s: revision %d: %w", key, rev, err)
		}
		last = rev
	}
}

// read reads the chunks ref names and checks them whole.
func (c *chunked) read(ctx context.Context, key string, ref chunkRef) ([]byte, error) {
	whole := make([]byte, 0, min(ref.Size, MaxEntryBytes))
	for i := range ref.Chunks {
		val, _, err := c.kv.get(ctx, chunkKey(key, ref.Nonce, i))
		if errors.Is(err, errNotFound) {
			return nil, fmt.Errorf("chunk %d of %d (%s): %w", i+1, ref.Chunks, ref.Nonce, errChunkGone)
		}
		if err != nil {
			return nil, fmt.Errorf("chunk %d of %d (%s): %w", i+1, ref.Chunks, ref.Nonce, err)
		}
		whole = append(whole, val...)
	}
	sum := sha256.Sum256(whole)
	if len(whole) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("chunks %s: %d bytes, sha256 %x; the head says %d bytes, sha256 %s",
			ref.Nonce, len(whole), sum, ref.Size, ref.SHA256)
	}
	return whole, nil
}

// decodeHead reports whether val is a head, and what it names.
func decodeHead(val []byte) (chunkRef, bool, error) {
	if !bytes.HasPrefix(val, headPrefix) {
		return chunkRef{}, false, nil
	}
	var h head
	if err := json.Unmarshal(val, &h); err != nil {
		return chunkRef{}, false, fmt.Errorf("decode the head of a chunked value: %w", err)
	}
	if h.Chunked.Nonce == "" || h.Chunked.Chunks < 1 {
		return chunkRef{}, false, fmt.Errorf("head of a chunked value names no chunks: %s", val)
	}
	return h.Chunked, true, nil
}

func (c *chunked) create(ctx context.Context, key string, val []byte) (uint64, error) {
	return c.write(ctx, key, val, func(v []byte) (uint64, error) { return c.kv.create(ctx, key, v) },
		func() error {
			if _, _, err := c.kv.get(ctx, key); err == nil {
				return errExists
			} else if !errors.Is(err, errNotFound) {
				return err
			}
			return nil
		})
}

func (c *chunked) update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	return c.write(ctx, key, val, func(v []byte) (uint64, error) { return c.kv.update(ctx, key, v, rev) },
		func() error {
			_, cur, err := c.kv.get(ctx, key)
			if err == nil && cur != rev {
				return errRevision
			}
			return err
		})
}

// write stores val under key with put (the key's create or compare-and-set), in chunks
// when it is too large for one write; check, run before chunks are written, fails early a
// write that put would refuse (so that a fenced writer does not write megabytes first).
func (c *chunked) write(ctx context.Context, key string, val []byte, put func([]byte) (uint64, error), check func() error) (uint64, error) {
	limit := c.kv.maxValue()
	if limit <= 0 || len(val) <= limit {
		wasBare := c.isBare(key)
		c.setBare(key, false)
		rev, err := put(val)
		if err != nil {
			return 0, err
		}
		if wasBare || c.clean(ctx, key, rev, "") {
			c.setBare(key, true)
		}
		return rev, nil
	}
	c.setBare(key, false)
	if err := check(); err != nil {
		return 0, err
	}
	ref, revs, err := c.writeChunks(ctx, key, val, limit)
	if err != nil {
		c.removeAll(ctx, key, ref.Nonce, revs)
		return 0, err
	}
	raw, err := json.Marshal(head{Chunked: ref, Changes: "chunked"})
	if err != nil {
		return 0, err
	}
	rev, err := put(raw)
	if err != nil {
		c.removeAll(ctx, key, ref.Nonce, revs)
		return 0, err
	}
	c.clean(ctx, key, rev, ref.Nonce)
	return rev, nil
}

// writeChunks stores val in chunks of at most limit bytes under a new nonce, and returns
// their revisions (those written, on failure too).
func (c *chunked) writeChunks(ctx context.Context, key string, val []byte, limit int) (chunkRef, []uint64, error) {
	sum := sha256.Sum256(val)
	ref := chunkRef{Nonce: rand.Text(), Chunks: (len(val) + limit - 1) / limit, Size: len(val), SHA256: hex.EncodeToString(sum[:])}
	revs := make([]uint64, 0, ref.Chunks)
	for i := range ref.Chunks {
		part := val[i*limit : min((i+1)*limit, len(val))]
		rev, err := c.kv.create(ctx, chunkKey(key, ref.Nonce, i), part)
		if err != nil {
			return ref, revs, fmt.Errorf("chunk %d of %d: %w", i+1, ref.Chunks, err)
		}
		revs = append(revs, rev)
	}
	return ref, revs, nil
}

// cleanTimeout bounds the clean-up after a write: it is best effort, and must not use up
// the caller's time (a purge the server refuses, for want of the permission, gets no
// answer until the request times out).
const cleanTimeout = 5 * time.Second

// removeAll removes the chunks of a write whose head was not written (best effort: what
// remains, the next write of the key removes).
func (c *chunked) removeAll(ctx context.Context, key, nonce string, revs []uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanTimeout)
	defer cancel()
	for i, rev := range revs {
		_ = c.kv.remove(ctx, chunkKey(key, nonce, i), rev)
	}
}

// clean removes the chunks of key older than its head of revision rev, except those of
// nonce (the head's own), and reports whether it left none but those. Best effort: a
// chunk that stays is removed by a later write.
func (c *chunked) clean(ctx context.Context, key string, rev uint64, nonce string) bool {
	ctx, cancel := context.WithTimeout(ctx, cleanTimeout)
	defer cancel()
	chunks, err := c.kv.keys(ctx, key+chunksToken+">")
	if err != nil {
		return false
	}
	clean := true
	for k, r := range chunks {
		switch {
		case strings.HasPrefix(k, key+chunksToken+nonce+"."):
		case r < rev && c.kv.remove(ctx, k, r) == nil:
		default:
			clean = false
		}
	}
	return clean
}

func (c *chunked) isBare(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bare[key]
}

func (c *chunked) setBare(key string, bare bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bare == nil {
		c.bare = map[string]bool{}
	}
	if bare {
		c.bare[key] = true
	} else {
		delete(c.bare, key)
	}
}

// remove removes a key written whole; a chunked layer is not stacked on itself.
func (c *chunked) remove(ctx context.Context, key string, rev uint64) error {
	return c.kv.remove(ctx, key, rev)
}

// keys lists the keys of values, never their chunks.
func (c *chunked) keys(ctx context.Context, filter string) (map[string]uint64, error) {
	all, err := c.kv.keys(ctx, filter)
	if err != nil {
		return nil, err
	}
	for k := range all {
		if strings.Contains(k, chunksToken) {
			delete(all, k)
		}
	}
	return all, nil
}

// maxValue: no limit.
func (c *chunked) maxValue() int { return 0 }
