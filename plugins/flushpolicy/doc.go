// Package flushpolicy decides when a partition log fsyncs.
//
// A [Policy] only decides; the partition log performs the fsync. The log
// calls [Policy.Appended] once per append, right after one produce request's
// batches for one partition reach the page cache, and before the append
// returns. The policy answers with a [Decision]: fsync now, fsync no later
// than a deadline (even if no further append comes), or leave it to the
// operating system. After every fsync, whoever asked for it, the log calls
// [Policy.Flushed] so a policy that keeps state can reset it.
//
// # Time
//
// Policies never read a clock. Time arrives in [AppendInfo.Now] and
// [FlushInfo.Now], and the counters since the last fsync arrive precomputed
// ([AppendInfo.UnflushedMessages], [AppendInfo.UnflushedBytes],
// [AppendInfo.OldestUnflushed]), so a policy is a deterministic function of
// its inputs and state, and tests drive it with explicit times. Callers pass
// time.Now() values, which carry the monotonic clock.
//
// A timeline for [EveryInterval](50ms): the first append after an fsync
// starts the clock; each later append either repeats the deadline or, once the
// oldest unflushed append is 50ms old, asks for the fsync itself; if no append
// comes first, the log fsyncs at the deadline.
//
//	t (ms)   0       20      45      50            70      120
//	append   A1      A2      A3                    A4      A5
//	answer   by=50   by=50   by=50                 by=120  flush (A4 is 50ms old)
//	log                              fsync A1-A3           fsync A4-A5
//
// # Why once per append, not once per record
//
// An append is the unit the log writes and the unit a producer waits for:
// the fsync that follows it covers all of its records, so a per-record
// answer could not be acted on more finely anyway. Calls can also be costly:
// external policies are to run over hashicorp/go-plugin gRPC, ~0.1 ms a call,
// which at a million 100-byte records per second would be a hundred seconds of
// calls per second. One call per append crosses the process boundary once per
// produce request and partition. The interface is shaped for that shim:
// context first, plain request and response structs, no function fields.
//
// # What a crash loses
//
// A process crash (kill -9, panic, OOM kill) loses nothing that reached the
// log, under every policy: appended bytes live in the kernel's page cache,
// which survives the process, and the kernel writes them back on its own.
// A power cut, kernel panic or disk detach loses whatever was not fsynced.
// The built-ins bound that loss for data the log acknowledged by default
// (acks=1 or acks=all, which mean "in the page cache of the required
// replicas"):
//
//	policy             spec                after a power cut, acknowledged data lost is at most
//	EveryBatch         every-batch         nothing: the append returns only after its fsync
//	EveryMessages(n)   messages:n=1000     fewer than n records
//	EveryBytes(n)      bytes:n=1048576     fewer than n bytes
//	EveryInterval(d)   interval:ms=50      the appends of the last d, plus those made during one fsync
//	Adaptive(b, max)   adaptive:budget=2ms nothing while an fsync takes <= b (it fsyncs every append);
//	                                       else the appends of the last max (default 50ms), plus those
//	                                       made during one fsync
//	Never()            never               the active segment (the log still fsyncs a segment when it
//	                                       rolls and on close); Linux usually writes dirty pages back
//	                                       within ~30 s (vm.dirty_expire_centisecs), but promises nothing
//
// Each built-in states its bound as a [Bound] through [Bounded], which the
// conformance suite (package flushpolicytest) checks on simulated workloads.
//
// # Adaptive: fsync as often as a latency budget allows
//
// [Adaptive] learns what an fsync costs on this disk (a moving average of
// [FlushInfo.Duration]) and fsyncs every append while that fits the budget,
// so on a fast SSD it loses nothing. On a disk whose fsyncs cost more than
// the budget (a single HDD: 5-10 ms), an fsync per append would slow every
// producer past what it allowed, so it groups: one fsync per window of four
// fsync costs, capped at max, which keeps the device at most about a quarter
// busy with fsyncs and the loss window bounded by max.
//
// The bounds hold per partition, because each partition log has its own
// Policy, and they assume the default acks, which do not wait for an fsync.
// In the durable-ack mode (an ack waits for the fsync that covers its batch)
// no acknowledged data is lost under any policy; the policy then trades ack
// latency instead. Replication changes the picture again: a record is lost only if
// every replica that had it loses it.
//
// # Choosing a policy by name
//
// Built-ins are registered under the names above; [New] builds one from a
// spec ("name" or "name:key=value,key=value"), and [Register] adds more.
// Every built-in implements fmt.Stringer, returning a spec that [New] turns
// back into an equal policy.
package flushpolicy
