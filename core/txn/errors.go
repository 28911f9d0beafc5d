package txn

import "errors"

// The sentinels below are the coordinator's answers; every error it returns
// wraps one of them (errors.Is), and the transport maps each to its Kafka
// error code.
var (
	// ErrInvalidRequest: an empty transactional id. INVALID_REQUEST.
	ErrInvalidRequest = errors.New("txn: invalid request")
	// ErrInvalidTransactionTimeout: a transaction timeout of zero or less,
	// or above Options.MaxTimeout. INVALID_TRANSACTION_TIMEOUT.
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")
	// ErrInvalidProducerIDMapping: the transactional id is unknown, or its
	// producer id is another. INVALID_PRODUCER_ID_MAPPING.
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")
	// ErrProducerFenced: the request's producer epoch is not the id's
	// current one: a newer producer with the same transactional id (or a
	// timeout's abort) bumped it. PRODUCER_FENCED.
	ErrProducerFenced = errors.New("txn: producer fenced")
	// ErrConcurrentTransactions: the id's previous transaction is still
	// completing (its markers are being written) or a write of its state is
	// in flight; the client retries. CONCURRENT_TRANSACTIONS.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")
	// ErrInvalidTxnState: the request does not fit the transaction's state
	// (EndTxn with no transaction open, commit after an abort began, a
	// partition verified that is not in the transaction). INVALID_TXN_STATE.
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")
	// ErrTransactionalIDNotFound: DescribeTransactions of an id the
	// coordinator does not know. TRANSACTIONAL_ID_NOT_FOUND.
	ErrTransactionalIDNotFound = errors.New("txn: transactional id not found")
	// ErrNotCoordinator: the id's partition of __transaction_state is not
	// loaded here; the client looks for the coordinator again.
	// NOT_COORDINATOR.
	ErrNotCoordinator = errors.New("txn: not the coordinator")
	// ErrCoordinatorLoadInProgress: the id's partition is being loaded.
	// COORDINATOR_LOAD_IN_PROGRESS.
	ErrCoordinatorLoadInProgress = errors.New("txn: coordinator load in progress")
	// ErrCoordinatorNotAvailable: the coordinator is closed, or a write to
	// the transaction log failed; the client retries.
	// COORDINATOR_NOT_AVAILABLE.
	ErrCoordinatorNotAvailable = errors.New("txn: coordinator not available")
	// ErrCorrupt: a record of the transaction log cannot be read. Load
	// fails rather than forget a transaction.
	ErrCorrupt = errors.New("txn: corrupt transaction log")
)
