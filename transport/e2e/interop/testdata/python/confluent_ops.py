"""weir's interop operations through confluent-kafka 1.7.0 (Debian
python3-confluent-kafka, on librdkafka).

Usage: confluent_ops.py BOOTSTRAP OPERATION TOPIC

Runs one operation of transport/e2e/interop (doc.go there says what each
does) on TOPIC (its group is TOPIC-g) and asserts what confluent-kafka sees;
exits non-zero naming what failed. The operations confluent-kafka 1.7.0 has
no API for (incremental, deleterecords, offsetdelete) are not here:
python_test.go skips them, naming why.
"""

import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from common import check, deadline_loop, log

BOOTSTRAP, OP, TOPIC = sys.argv[1:4]
GROUP = TOPIC + "-g"
COMPACT_KEYS, COMPACT_ROUNDS, FILLER = 10, 5, "filler"


_admin = []


def admin():
    """The one AdminClient (its futures fail when the client is destroyed, so it lives as long as the script)."""
    if not _admin:
        _admin.append(AdminClient({"bootstrap.servers": BOOTSTRAP, "client.id": "interop-confluent-kafka"}))
    return _admin[0]


def wait(futures, what):
    """Waits for an AdminClient call's futures, failing with its error."""
    for key, f in futures.items():
        try:
            f.result(timeout=30)
        except KafkaException as e:
            check(False, f"{what} {key}: {e}")


def create(partitions, configs=None):
    wait(admin().create_topics([NewTopic(TOPIC, partitions, 1, config=configs or {})]), "CreateTopics")


def produce(records, topic=TOPIC, **conf):
    """records: (key, value, partition or None); returns the delivered messages (or errors)."""
    p = Producer({"bootstrap.servers": BOOTSTRAP, **conf})
    delivered = []
    for k, v, part in records:
        kwargs = {} if part is None else {"partition": part}
        p.produce(topic, key=k, value=v, on_delivery=lambda err, m: delivered.append((err, m)), **kwargs)
    check(p.flush(30) == 0, f"{topic}: records undelivered after 30 s")
    return delivered


def produce_ok(records):
    out = []
    for err, m in produce(records):
        check(err is None, f"produce to {TOPIC}: {err}")
        out.append(m)
    return out


def read(partition, until):
    """Reads partition from its start until offset until-1; returns (offset, key, value)."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP + "-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
    out = []
    for _ in deadline_loop(f"reading {TOPIC}/{partition} up to offset {until}"):
        m = c.poll(0.2)
        if m is None:
            continue
        check(m.error() is None, f"consuming {TOPIC}/{partition}: {m.error()}")
        out.append((m.offset(), m.key().decode() if m.key() else None, m.value().decode()))
        if m.offset() >= until - 1:
            break
    c.close()
    return out


def consume_group(n, stay=None):
    """Consumes n records as a member of GROUP and commits; calls stay() while still a member."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "heartbeat.interval.ms": 200})
    c.subscribe([TOPIC])
    got = []
    for _ in deadline_loop(f"group {GROUP} consuming {n} records of {TOPIC}"):
        m = c.poll(0.2)
        if m is None:
            continue
        check(m.error() is None, f"consuming {TOPIC}: {m.error()}")
        got.append(m)
        if len(got) >= n:
            break
    c.commit(asynchronous=False)
    if stay:
        stay()
    c.close()
    return got


def smoke():
    create(3)
    records = [(f"k{i:02d}", f"v{i:02d}", None) for i in range(20)]
    produce_ok(records)
    got = consume_group(20)
    check(
        sorted((m.key().decode(), m.value().decode()) for m in got) == [(k, v) for k, v, _ in records],
        f"consumed {[(m.key(), m.value()) for m in got]}",
    )


def configs():
    create(1)
    wait(admin().alter_configs([ConfigResource("topic", TOPIC, set_config={"retention.ms": "7200000"})]), "AlterConfigs")
    res = ConfigResource("topic", TOPIC)
    entries = admin().describe_configs([res])[res].result(timeout=30)
    entry = entries.get("retention.ms")
    log(f"retention.ms after AlterConfigs: {entry} (source {entry and entry.source})")
    check(entry is not None and entry.value == "7200000", f"retention.ms reads back {entry}, want 7200000")


def brokerconfigs():
    res = ConfigResource("broker", "0")
    entries = admin().describe_configs([res])[res].result(timeout=30)
    entry = entries.get("num.partitions")
    log(f"broker 0: {len(entries)} configs, num.partitions={entry and entry.value}")
    check(entry is not None and entry.value,
          f"DescribeConfigs broker 0: no num.partitions in {sorted(entries)}")


def partitions():
    create(1)
    wait(admin().create_partitions([NewPartitions(TOPIC, 3)]), "CreatePartitions")
    for _ in deadline_loop(f"metadata showing 3 partitions of {TOPIC}"):
        if len(admin().list_topics(TOPIC, timeout=10).topics[TOPIC].partitions) == 3:
            break
    (m,) = produce_ok([("p2", "in partition 2", 2)])
    check(m.partition() == 2 and m.offset() == 0, f"produced to {m.partition()} at {m.offset()}")
    got = read(2, 1)
    check(got == [(0, "p2", "in partition 2")], f"partition 2 holds {got}")


def compaction():
    create(1, {"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
               "min.cleanable.dirty.ratio": "0.01"})
    for r in range(COMPACT_ROUNDS):
        produce_ok([(f"key{k}", f"key{k}-r{r}", None) for k in range(COMPACT_KEYS)])
    last = {f"key{k}": f"key{k}-r{COMPACT_ROUNDS - 1}" for k in range(COMPACT_KEYS)}
    for _ in deadline_loop(f"{TOPIC} compacted to the last value of each key"):
        # A record of the filler key rolls the segment holding the last round
        # (segment.ms), so the cleaner may clean all of it.
        (m,) = produce_ok([(FILLER, "f", None)])
        got = [(k, v) for _, k, v in read(0, m.offset() + 1) if k != FILLER]
        if sorted(got) == sorted(last.items()):
            log(f"compacted: {len(got)} records of {COMPACT_KEYS} keys left of {COMPACT_KEYS * COMPACT_ROUNDS}")
            break


def internal():
    create(1)
    produce_ok([("k", "v", None)])
    consume_group(1)  # a group's commit: Kafka creates __consumer_offsets for it
    topics = admin().list_topics(timeout=10).topics
    check("__consumer_offsets" in topics, f"__consumer_offsets not listed: {sorted(topics)}")
    # TopicMetadata in 1.7.0 has no internal flag: the Go test checks it.
    ((err, m),) = produce([("k", "written by a client", None)], topic="__consumer_offsets",
                         **{"message.timeout.ms": 10000})
    check(err is not None, f"a produce to __consumer_offsets succeeded at offset {m.offset()}")
    log(f"produce to __consumer_offsets refused: {err}")


def groups():
    create(1)
    produce_ok([(f"k{i}", f"v{i}", None) for i in range(3)])

    def while_member():
        listed = {g.id: g for g in admin().list_groups(timeout=10)}
        check(GROUP in listed, f"ListGroups: no {GROUP} in {sorted(listed)}")
        g = admin().list_groups(GROUP, timeout=10)[0]  # ListGroups, then DescribeGroups
        log(f"group {g.id}: state {g.state}, protocol type {g.protocol_type}, protocol {g.protocol}, "
            f"members {[m.id for m in g.members]}")
        check(g.error is None and g.protocol_type == "consumer", f"{GROUP}: protocol type {g.protocol_type!r}, error {g.error}")
        check(g.state == "Stable" and g.protocol and len(g.members) == 1, f"{GROUP}: {g.state}, {g.protocol}, {g.members}")

    consume_group(3, stay=while_member)


def read_isolated(isolation, until):
    """Reads partition 0 from its start, with isolation.level isolation, until a record at or past offset
    until-1 or the end of the partition; returns the values."""
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP + "-" + isolation, "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    out = []
    for _ in deadline_loop(f"reading {TOPIC}/0 ({isolation}) to its end"):
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
            if m.offset() >= until:
                break
            continue
        check(m.error() is None, f"consuming {TOPIC}/0 ({isolation}): {m.error()}")
        out.append(m.value().decode())
    c.close()
    return out


def transactions():
    """Three transactions of five records each: committed, aborted, committed. read_committed sees the ten
    committed records, read_uncommitted all fifteen."""
    create(1)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": TOPIC + "-tx", "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    for name, commit in (("c0", True), ("a", False), ("c1", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(TOPIC, key=f"{name}-{i}", value=f"{name}-{i}", partition=0)
        check(p.flush(30) == 0, f"{TOPIC}: transaction {name}: records undelivered after 30 s")
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # 15 records and 3 markers: the log ends at 18.
    committed = read_isolated("read_committed", 18)
    want = [f"{n}-{i}" for n in ("c0", "c1") for i in range(5)]
    check(committed == want, f"read_committed read {committed}, want {want}")
    uncommitted = read_isolated("read_uncommitted", 18)
    want = [f"{n}-{i}" for n in ("c0", "a", "c1") for i in range(5)]
    check(uncommitted == want, f"read_uncommitted read {uncommitted}, want {want}")


def restart():
    """After the broker restarted: the groups operation's group (TOPIC is its topic), now empty."""
    listed = {g.id: g for g in admin().list_groups(timeout=10)}
    check(GROUP in listed, f"ListGroups: no {GROUP} in {sorted(listed)}")
    g = admin().list_groups(GROUP, timeout=10)[0]
    log(f"group {g.id} after the restart: state {g.state}, protocol type {g.protocol_type}, members {g.members}")
    check(g.error is None and g.protocol_type == "consumer" and g.state == "Empty" and not g.members,
          f"{GROUP}: {g.state}, protocol type {g.protocol_type!r}, members {g.members}, error {g.error}")
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP})
    (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
    c.close()
    check(tp.error is None and tp.offset == 3, f"committed {tp}, want {TOPIC}/0 at 3")


{"smoke": smoke, "configs": configs, "brokerconfigs": brokerconfigs, "partitions": partitions, "compaction": compaction,
 "internal": internal, "groups": groups, "transactions": transactions, "restart": restart}[OP]()
log(f"confluent-kafka {OP}: ok")
