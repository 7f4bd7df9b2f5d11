// Package logdir is kafkamender's offline log-directory tool: it inspects the log dirs of
// a stopped Kafka broker, moves a partition between two log dirs of one broker, and
// recovers a partition a broker lost by copying a follower's replica. It works on the
// filesystem only; no broker, controller or ZooKeeper is asked anything. Command worker
// runs it as "worker logdir inspect|move|recover".
//
// # What a log dir holds
//
// Each of a broker's log.dirs holds one folder per partition, "<topic>-<partition>"
// (segments, indexes, leader-epoch-checkpoint, partition.metadata), plus meta.properties
// (broker.id or node.id, cluster.id, and on KRaft brokers of Kafka 3.7 and later
// directory.id), .lock, .kafka_cleanshutdown after a clean stop, and four checkpoint files:
// cleaner-offset-checkpoint, log-start-offset-checkpoint, recovery-point-offset-checkpoint
// and replication-offset-checkpoint. A checkpoint file is "0" (the format version), the
// number of entries, and one "<topic> <partition> <offset>" line per entry. ParseCheckpoint
// reads them strictly and Checkpoint.Bytes writes them byte for byte as Kafka does.
//
// # Move
//
// Move, for a partition T-P from the log dir D1 to the log dir D2 of one stopped broker:
//
//  1. Checks, changing nothing: D1 and D2 differ, both have meta.properties naming the
//     same broker and cluster, no process holds either .lock, on a KRaft broker both
//     carry distinct directory ids (below), both dirs' checkpoint files parse and list no partition twice,
//     T-P is in D1 or D2 (a copy in both must be identical), no online move of T-P is
//     pending (a "-future" folder), the staging directories are on the dirs'
//     filesystems, D2 has room.
//  2. Takes write locks on D1/.lock and D2/.lock (step "locked") and checks again.
//  3. Copies D1/T-P into D2.kafkamender/T-P, fsyncing every file and directory, verifies
//     the copy (file list, sizes, SHA-256) against the source ("copying", "staged"), and
//     renames it into D2/T-P ("placed").
//  4. For each checkpoint file in which D1 lists T-P: writes D2's file with that entry
//     ("target-tmp", "target-partial", "target-checkpoints"), then D1's without it
//     ("source-tmp", "source-partial", "source-checkpoints"). Each file is written to
//     "<file>.tmp", fsynced, renamed over the file, and the dir fsynced, as Kafka itself
//     writes them; the other entries keep their order.
//  5. Verifies D2/T-P against the source's hashes and the entries of both dirs
//     ("verified"), renames D1/T-P to D1.kafkamender/trash-T-P ("trashed"), removes it,
//     and removes the empty staging directories ("done").
//
// # Recover
//
// Recover copies T-P from D1, a log dir of a healthy broker with a replica (a follower),
// into D2, a log dir of the broken broker, the way Move copies it (steps "locked" to
// "placed"), gives D2 the entries D1 has for T-P ("target-…"), verifies ("verified") and
// cleans up ("done"). Both brokers must be stopped, of one cluster, and different. It
// changes nothing in D1. It refuses when D2 already holds T-P, unless that is an identical
// copy (an interrupted run), which it finishes.
//
// # Why staging is outside the log dir
//
// At startup Kafka parses every subdirectory of a log dir as a partition folder (or a
// "-delete", "-future" or "-stray" one) and fails the whole dir on any other name. So the
// tool never creates a directory inside a log dir but the partition folder itself, and
// that only by renaming a complete, verified copy into it. Copies and trash live in the
// sibling D + ".kafkamender", which must be on D's filesystem (same device) so that the
// renames are atomic; when D is a mount point, it is not, and the tool refuses.
//
// # Symbolic links
//
// The broker's user owns the log dirs and can plant links in them; the tool may run as
// root. So it follows none below a log dir or its staging directory (Kafka makes none
// there): it opens each log dir, and the directory holding it, once (the path the
// operator gave may go through links), and reaches everything else one name at a time
// through open directories (os.Root, so no name can leave them), refusing a link with a
// SymlinkError that names it. Files are opened and then checked (fstat against lstat) to
// be the entry that was not a link; new files are created with O_EXCL; renames (renameat
// between the open directories), removals and time changes act on names, never on a
// link's target. Inspect reports each link as a problem and does not read through it.
//
// # Locks
//
// A running broker holds a POSIX record lock on each dir's .lock (Java's
// FileChannel.tryLock is fcntl F_SETLK on Linux). The tool refuses when fcntl F_GETLK
// finds one, naming the holder's pid, and holds the same locks on the dirs it touches
// while it runs, so that a broker started meanwhile fails to lock the dir instead of
// loading half-done state.
//
// # Resuming
//
// A rerun of the same command after an interruption at any step (a kill, a crash, a power
// loss) finishes the job. The state is read from the filesystem, never from a record of
// the earlier run:
//
//   - T-P only in D1: a fresh move, or one interrupted before the copy was placed. A
//     partial copy in staging is thrown away and the copy made again.
//   - T-P in both, identical: the copy was placed; the checkpoint updates, the checks and
//     the removal of the source are left. The source is whole (it is only ever removed by
//     an atomic rename into the trash), so it is what the target is compared with.
//   - T-P in both, different: not something this tool leaves; it refuses.
//   - T-P only in D2: the source was removed, which happens only after the checkpoint
//     files were done; the trash and staging directories are removed.
//   - Leftover "<checkpoint>.tmp" files are removed: the complete file is the one without
//     the suffix.
//
// The partition is listed in two log dirs of the broker (which makes Kafka refuse to
// start: "Duplicate log directories") only between the rename into D2 and the rename of
// the source into the trash, and a rerun resolves that. At every step, either D1/T-P is
// whole with its entries in the files of D1, or D2/T-P is whole with its entries in D2.
//
// For tests, in a build with the tag kafkamender_testhooks, the environment variable
// KAFKAMENDER_LOGDIR_KILL_AT=<step> makes the process SIGKILL itself at that step;
// MoveSteps and RecoverSteps list them in order. Other builds ignore the variable.
//
// # KRaft brokers with several log dirs
//
// Since Kafka 3.7 (KIP-858) a KRaft broker may have several log dirs, each with a
// directory.id in its meta.properties, and the controller records which directory holds
// each replica. The broker is the authority when the two disagree: at start-up it loads a
// log from whichever of its dirs holds it and reports the directory to the controller
// (AssignReplicasToDirs), which records it. So Move supports two dirs of one KRaft broker
// when both carry distinct directory ids (offlineMoveAllowed holds the rule; the
// acceptance test moves a replica on a KRaft 4.1 node with two dirs and restarts it).
// Recover is not subject to it: it restores a missing replica into the directory given.
//
// # Clean shutdown
//
// A broker that finds .kafka_cleanshutdown skips log recovery. So Move and Recover refuse
// to copy from a dir without the marker into a dir with it: the copy may need the recovery
// the target broker would skip.
package logdir
