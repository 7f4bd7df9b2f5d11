package journal

import "context"

// RawKeys lists every key under the store's chunking, chunk keys included, with their
// revisions.
func RawKeys(ctx context.Context, s *Store) (map[string]uint64, error) {
	return s.kv.(*chunked).kv.keys(ctx, ">")
}

// PutRaw writes key under the store's chunking, as a worker that died mid-write (or one
// of an earlier version) left it.
func PutRaw(ctx context.Context, s *Store, key string, val []byte) error {
	_, err := s.kv.(*chunked).kv.create(ctx, key, val)
	return err
}

// GetRaw reads key's value through the chunking, undecoded.
func GetRaw(ctx context.Context, s *Store, key string) ([]byte, error) {
	val, _, err := s.kv.get(ctx, key)
	return val, err
}
