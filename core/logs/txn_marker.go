package logs

// Marker is a transaction marker to append to a partition: the commit or
// abort of a producer's transaction, stamped with the coordinator's epoch.
//
// (helper txncoord: this declaration stands in for helper txndata's, whose
// file replaces it at the merge; the fields are the shared plan's.)
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
}
