"""weir's interop operations through kafka-python 2.0.2 (Debian python3-kafka).

Usage: kafka_python_ops.py BOOTSTRAP OPERATION TOPIC

Runs one operation of transport/e2e/interop (doc.go there says what each
does) on TOPIC (its group is TOPIC-g) and asserts what kafka-python sees;
exits non-zero naming what failed. The operations kafka-python 2.0.2 has
no API for (incremental, deleterecords, offsetdelete) are not here:
python_test.go skips them, naming why.
"""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import KafkaError

from common import check, deadline_loop, log

BOOTSTRAP, OP, TOPIC = sys.argv[1:4]
GROUP = TOPIC + "-g"
COMPACT_KEYS, COMPACT_ROUNDS, FILLER = 10, 5, "filler"


def admin():
    return KafkaAdminClient(bootstrap_servers=BOOTSTRAP, client_id="interop-kafka-python")


def create(partitions, configs=None):
    resp = admin().create_topics(
        [NewTopic(TOPIC, num_partitions=partitions, replication_factor=1, topic_configs=configs or {})]
    )
    for topic, code, message in resp.topic_errors:
        check(code == 0, f"CreateTopics {topic}: error {code} {message}")


def produce(records, **kwargs):
    """records: (key, value, partition or None); returns their offsets."""
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, **kwargs)
    futures = [
        p.send(TOPIC, key=k.encode() if k else None, value=v.encode(), partition=part) for k, v, part in records
    ]
    p.flush()
    out = [f.get(timeout=30) for f in futures]
    p.close()
    return out


def read(partition, until):
    """Reads partition from its start until offset until-1; returns (offset, key, value)."""
    c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(TOPIC, partition)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    for _ in deadline_loop(f"reading {TOPIC}/{partition} up to offset {until}"):
        for recs in c.poll(timeout_ms=200).values():
            out += [(r.offset, r.key.decode() if r.key else None, r.value.decode()) for r in recs]
        if c.position(tp) >= until:
            break
    c.close()
    return out


def consume_group(n, stay=None):
    """Consumes n records as a member of GROUP and commits; calls stay() while still a member."""
    c = KafkaConsumer(
        TOPIC,
        bootstrap_servers=BOOTSTRAP,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=200,
    )
    got = []
    for _ in deadline_loop(f"group {GROUP} consuming {n} records of {TOPIC}"):
        for recs in c.poll(timeout_ms=200).values():
            got += recs
        if len(got) >= n:
            break
    c.commit()
    if stay:
        stay()
    c.close()
    return got


def describe(name):
    resp = admin().describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    for code, message, _type, _name, entries in resp[0].resources:
        check(code == 0, f"DescribeConfigs {TOPIC}: error {code} {message}")
        for e in entries:
            if e[0] == name:
                return e
    check(False, f"DescribeConfigs {TOPIC}: no {name}")


def smoke():
    create(3)
    records = [(f"k{i:02d}", f"v{i:02d}", None) for i in range(20)]
    produce(records)
    got = consume_group(20)
    check(
        sorted((r.key.decode(), r.value.decode()) for r in got) == [(k, v) for k, v, _ in records],
        f"consumed {[(r.key, r.value) for r in got]}",
    )


def configs():
    create(1)
    resp = admin().alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "7200000"})])
    for code, message, _type, name in resp.resources:
        check(code == 0, f"AlterConfigs {name}: error {code} {message}")
    entry = describe("retention.ms")
    log(f"retention.ms after AlterConfigs: {entry}")
    check(entry[1] == "7200000", f"retention.ms reads back {entry[1]}, want 7200000")


def brokerconfigs():
    resp = admin().describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
    for code, message, _type, _name, entries in resp[0].resources:
        check(code == 0, f"DescribeConfigs broker 0: error {code} {message}")
        values = {e[0]: e[1] for e in entries}
        log(f"broker 0: {len(values)} configs, num.partitions={values.get('num.partitions')}")
        check(values.get("num.partitions"), f"DescribeConfigs broker 0: no num.partitions in {sorted(values)}")


def partitions():
    create(1)
    admin().create_partitions({TOPIC: NewPartitions(total_count=3)})
    for _ in deadline_loop(f"metadata showing 3 partitions of {TOPIC}"):
        c = KafkaConsumer(bootstrap_servers=BOOTSTRAP)
        n = len(c.partitions_for_topic(TOPIC) or ())
        c.close()
        if n == 3:
            break
    meta = produce([("p2", "in partition 2", 2)])[0]
    check(meta.partition == 2 and meta.offset == 0, f"produced to {meta}")
    got = read(2, 1)
    check(got == [(0, "p2", "in partition 2")], f"partition 2 holds {got}")


def compaction():
    create(1, {"cleanup.policy": "compact", "segment.bytes": "1024", "segment.ms": "100",
               "min.cleanable.dirty.ratio": "0.01"})
    for r in range(COMPACT_ROUNDS):
        produce([(f"key{k}", f"key{k}-r{r}", None) for k in range(COMPACT_KEYS)])
    last = {f"key{k}": f"key{k}-r{COMPACT_ROUNDS - 1}" for k in range(COMPACT_KEYS)}
    for _ in deadline_loop(f"{TOPIC} compacted to the last value of each key"):
        # A record of the filler key rolls the segment holding the last round
        # (segment.ms), so the cleaner may clean all of it.
        end = produce([(FILLER, "f", None)])[0].offset + 1
        got = [(k, v) for _, k, v in read(0, end) if k != FILLER]
        if sorted(got) == sorted(last.items()):
            log(f"compacted: {len(got)} records of {COMPACT_KEYS} keys left of {COMPACT_KEYS * COMPACT_ROUNDS}")
            break


def internal():
    create(1)
    produce([("k", "v", None)])
    consume_group(1)  # a group's commit: Kafka creates __consumer_offsets for it
    topics = {t["topic"]: t for t in admin().describe_topics()}
    check("__consumer_offsets" in topics, f"__consumer_offsets not listed: {sorted(topics)}")
    check(topics["__consumer_offsets"]["is_internal"], f"__consumer_offsets not internal: {topics['__consumer_offsets']}")
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, retries=0, max_block_ms=10000)
    try:
        meta = p.send("__consumer_offsets", key=b"k", value=b"written by a client").get(timeout=30)
        check(False, f"a produce to __consumer_offsets succeeded: {meta}")
    except KafkaError as e:
        log(f"produce to __consumer_offsets refused: {e!r}")
    p.close()


def groups():
    create(1)
    produce([(f"k{i}", f"v{i}", None) for i in range(3)])

    def while_member():
        a = admin()
        listed = dict(a.list_consumer_groups())
        check(listed.get(GROUP) == "consumer", f"ListGroups: {GROUP} listed as {listed.get(GROUP)!r}: {listed}")
        (g,) = a.describe_consumer_groups([GROUP])
        log(f"DescribeGroups: {g}")
        check(g.error_code == 0 and g.protocol_type == "consumer", f"DescribeGroups {GROUP}: {g}")
        check(g.state == "Stable" and g.protocol and len(g.members) == 1, f"DescribeGroups {GROUP}: {g}")

    consume_group(3, stay=while_member)


def restart():
    """After the broker restarted: the groups operation's group (TOPIC is its topic), now empty."""
    a = admin()
    listed = dict(a.list_consumer_groups())
    check(listed.get(GROUP) == "consumer", f"ListGroups: {GROUP} listed as {listed.get(GROUP)!r}: {listed}")
    (g,) = a.describe_consumer_groups([GROUP])
    log(f"DescribeGroups after the restart: {g}")
    check(g.error_code == 0 and g.protocol_type == "consumer" and g.state == "Empty" and not g.members,
          f"DescribeGroups {GROUP}: {g}")
    offsets = a.list_consumer_group_offsets(GROUP)
    om = offsets.get(TopicPartition(TOPIC, 0))
    check(om is not None and om.offset == 3, f"OffsetFetch {GROUP}: {offsets}, want {TOPIC}/0 at 3")


{"smoke": smoke, "configs": configs, "brokerconfigs": brokerconfigs, "partitions": partitions, "compaction": compaction,
 "internal": internal, "groups": groups, "restart": restart}[OP]()
log(f"kafka-python {OP}: ok")
