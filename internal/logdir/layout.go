package logdir

import (
	"fmt"
	"path/filepath"
	"strings"
)

// StagingSuffix names the sibling of a log dir D where the tool stages copies and trash:
// D + ".kafkamender". It is never inside D: Kafka parses every subdirectory of a log dir
// as a partition folder and fails to load the dir when one is not.
const StagingSuffix = ".kafkamender"

// StagingDir is the staging directory of the log dir dir (a resolved path).
func StagingDir(dir string) string { return filepath.Clean(dir) + StagingSuffix }

// trashPrefix names the source folder of a move once it is renamed out of the log dir,
// in the source's staging directory, before it is removed.
const trashPrefix = "trash-"

// CleanShutdownFile is the marker Kafka writes into each log dir when it stops cleanly
// (and removes when it starts). A broker that finds it skips log recovery.
const CleanShutdownFile = ".kafka_cleanshutdown"

// metadataTopic is the KRaft metadata log; its folder is not in the checkpoint files and
// is never moved by this tool.
const metadataTopic = "__cluster_metadata"

// FolderKind is what Kafka makes of a subdirectory of a log dir.
type FolderKind string

const (
	KindPartition FolderKind = "partition"
	KindMetadata  FolderKind = "metadata"  // __cluster_metadata-0, the KRaft metadata log
	KindDelete    FolderKind = "delete"    // <tp>.<id>-delete: a deleted log Kafka removes later
	KindFuture    FolderKind = "future"    // <tp>.<id>-future: the target of an online log-dir move
	KindStray     FolderKind = "stray"     // <tp>.<id>-stray: a KRaft replica the broker no longer hosts
	KindUnknown   FolderKind = "not-kafka" // anything else: Kafka fails to load the dir
)

// Kafka's suffixes of the folders that are not live partitions.
var kindSuffixes = []struct {
	suffix string
	kind   FolderKind
}{{"-delete", KindDelete}, {"-future", KindFuture}, {"-stray", KindStray}}

// ClassifyFolder says what Kafka makes of a subdirectory named name, and the partition
// it belongs to (for delete, future and stray folders when the name shows it).
func ClassifyFolder(name string) (FolderKind, TP) {
	for _, s := range kindSuffixes {
		if base, ok := strings.CutSuffix(name, s.suffix); ok {
			tp, _ := suffixedTP(base)
			return s.kind, tp
		}
	}
	tp, err := ParseTP(name)
	switch {
	case err != nil || tp.String() != name:
		return KindUnknown, TP{}
	case tp.Topic == metadataTopic:
		return KindMetadata, tp
	default:
		return KindPartition, tp
	}
}

// suffixedTP parses the "<topic>-<partition>.<id>" of a delete, future or stray folder.
func suffixedTP(base string) (TP, error) {
	i := strings.LastIndexByte(base, '.')
	if i < 0 {
		return TP{}, fmt.Errorf("%q: want <topic>-<partition>.<id>", base)
	}
	return ParseTP(base[:i])
}
