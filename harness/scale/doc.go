// Package scale measures how a broker copes with many partitions (issue
// 16): one `weir broker` subprocess (package brokerproc) is filled with N
// partitions and timed through what a broker holding that many must do:
// create them, answer Metadata for all, take a record on each and serve
// them all to one consumer, restart cleanly and after SIGKILL, serve a
// consumer of thousands of mostly idle partitions with and without fetch
// sessions (KIP-227), and keep a few hot partitions as fast beside the
// idle ones as alone.
//
// The broker is measured from outside, through /proc (package procstat):
// its open descriptors, resident memory and its peak, CPU time and its
// open-file limit, and through its pprof endpoint for goroutines (the
// Prometheus endpoint would gather a sample per partition and metric,
// which at 100,000 partitions costs the broker more than what is being
// measured). So the experiment runs unchanged against any broker binary:
// today's, which opens every segment's files at creation and start-up, and
// one with a descriptor budget, lazy start-up and fetch sessions.
//
// A step that fails ends the run with a StepError naming the step, and
// the figures of the steps before it; nothing is made up for the rest.
// Running out of descriptors is the expected failure of a broker without a
// budget, and the error then says what the broker said and whether it
// exited.
//
// The steps and their metrics (Outcome.Metrics):
//
//	1 create      create-s; fds-created, rss-created-MiB, hwm-created-MiB,
//	              goroutines-created, threads-created
//	2 metadata    metadata-p50-ms, metadata-p99-ms, metadata-response-KiB
//	3 records     produce-all-s, consume-all-s, records-consumed (== N)
//	4 clean       clean-stop-s, clean-restart-metadata-s, clean-restart-fetch-s,
//	              fds-clean-restart, rss-clean-restart-MiB, goroutines-clean-restart
//	5 unclean     unclean-restart-metadata-s, unclean-restart-fetch-s, fds-unclean-restart,
//	              rss-unclean-restart-MiB, goroutines-unclean-restart
//	6 sessions    per mode (sessions, no-sessions): fetch-req-B-MODE, fetch-resp-B-MODE
//	              (bytes per fetch), wire-B-MODE (every byte of the consumer's
//	              connections, per fetch), fetches-MODE, broker-cpu-s-MODE;
//	              session-req-ratio, session-resp-ratio (sessions over none),
//	              sessions-granted (1 when the broker gave a session id), session-partitions
//	7 hot         hot-idle-produce-msgs/s, hot-alone-produce-msgs/s, the same for
//	              consume (medians over the rounds); hot-ratio and hot-consume-ratio:
//	              the median over the rounds of each round's beside-idle over alone
//	              (both run back to back), hot-round-ratio-min and -max its range
//	whole run     fds-max and hwm-max-MiB (sampled every 250 ms over the run),
//	              open-files-limit (the broker's soft RLIMIT_NOFILE), fd-budget
//	              (its --max-open-files, when the flags give it)
//
// Restart figures are medians over Config.Scale.Restarts restarts; each
// restart's "serving" times run from the exec of the new process, polled
// concurrently: the first Metadata that lists every partition with a
// leader, and the first fetch that returns the record of one partition
// (the last one created).
package scale
