package events

// Dead letters: copies of event messages that a worker could not turn into a normal result
// (the handler panicked, or the event was delivered more often than allowed because the
// workers handling it stopped each time). Each still gets a "failed" result on its result
// subject; the copy keeps the original body and headers for whoever investigates, in the
// stream DeadStream, on DeadSubject(<cluster>).
const (
	DeadSubjectPrefix = "kafkamender.dead"
	DeadSubjects      = DeadSubjectPrefix + ".>"
	// DeadUnknownCluster is the last subject token of a dead letter whose cluster could not
	// be read from the event.
	DeadUnknownCluster = "_unknown"
)

// Headers a dead letter adds to the original message's headers. The original's own
// JetStream headers (those starting with "Nats-") are kept under HeaderOriginalPrefix + the
// rest of their name (Nats-Msg-Id as Kafkamender-Original-Msg-Id), so that they do not act
// on the dead-letter stream. A dead letter's own Nats-Msg-Id is dead-<stream sequence>.
const (
	HeaderOriginalSubject = "Kafkamender-Original-Subject" // the event subject
	HeaderStreamSequence  = "Kafkamender-Stream-Sequence"  // its sequence in EventsStream
	HeaderDeliveries      = "Kafkamender-Deliveries"       // how often it was delivered
	HeaderReason          = "Kafkamender-Reason"           // why it is a dead letter
	HeaderEventID         = "Kafkamender-Event-Id"         // the event id, when known
	HeaderOriginalPrefix  = "Kafkamender-Original-"
)

// DeadSubject is where the dead letters of events about cluster are stored.
func DeadSubject(cluster string) string {
	if !ValidClusterName(cluster) {
		cluster = DeadUnknownCluster
	}
	return DeadSubjectPrefix + "." + cluster
}
