// weir's interop operations through KafkaJS 2.2.4 (package.json here; the
// Go test runs `npm ci` when node_modules is missing).
//
// Usage: node ops.js BOOTSTRAP OPERATION TOPIC
//
// With WEIR_SASL_MECHANISM (scram-sha-256, scram-sha-512), WEIR_SASL_USER and
// WEIR_SASL_PASSWORD set, the client authenticates with SASL; with
// WEIR_SSL_CA (a PEM file) set, it connects with TLS trusting that CA
// (security_test.go's SASL_SSL operations, scram and scram-refused).
//
// Runs one operation of transport/e2e/interop (doc.go there says what each
// does) on TOPIC (its group is TOPIC-g) and asserts what KafkaJS sees; exits
// non-zero naming what failed. The operations KafkaJS has no API for
// (incremental, offsetdelete) are not here: kafkajs_test.go skips them,
// naming why.
'use strict'

// The default partitioner is what a new user gets; the warning that it
// changed in 2.0 is noise here.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const [BOOTSTRAP, OP, TOPIC] = process.argv.slice(2)
const GROUP = `${TOPIC}-g`
const COMPACT_KEYS = 10
const COMPACT_ROUNDS = 5
const FILLER = 'filler'
// Each wait polls with this deadline: generous for a loaded 2-core machine,
// below the Go test's bound on one operation (opTimeout, 90 s).
const DEADLINE_MS = 60000

const security = {}
if (process.env.WEIR_SSL_CA) security.ssl = { ca: [require('fs').readFileSync(process.env.WEIR_SSL_CA)] }
if (process.env.WEIR_SASL_MECHANISM) {
  security.sasl = {
    mechanism: process.env.WEIR_SASL_MECHANISM,
    username: process.env.WEIR_SASL_USER,
    password: process.env.WEIR_SASL_PASSWORD,
  }
}

const kafka = new Kafka({
  clientId: 'interop-kafkajs',
  brokers: [BOOTSTRAP],
  logLevel: logLevel.WARN,
  retry: { retries: 3 },
  ...security,
})

const log = msg => console.log(msg)

class CheckFailed extends Error {}

function check (cond, msg) {
  if (!cond) throw new CheckFailed(msg)
}

// until calls step until it returns true, failing after DEADLINE_MS.
async function until (what, step) {
  const end = Date.now() + DEADLINE_MS
  for (;;) {
    check(Date.now() < end, `timed out after ${DEADLINE_MS / 1000}s waiting for ${what}`)
    if (await step()) return
  }
}

async function withAdmin (fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

async function create (numPartitions, configs = {}) {
  const configEntries = Object.entries(configs).map(([name, value]) => ({ name, value }))
  const created = await withAdmin(a =>
    a.createTopics({ topics: [{ topic: TOPIC, numPartitions, replicationFactor: 1, configEntries }], waitForLeaders: true }))
  check(created, `createTopics ${TOPIC}: not created`)
}

// produce sends messages ({key, value, partition?}) with the producer's
// defaults and returns the record metadata.
async function produce (messages, topic = TOPIC) {
  const producer = kafka.producer()
  await producer.connect()
  try {
    return await producer.send({ topic, messages })
  } finally {
    await producer.disconnect()
  }
}

// consume reads as a member of group (from the beginning where it has no
// offsets) until done(messages) holds, committing what it read; while it is
// still a member it calls stay(). Returns the messages.
async function consume (group, done, stay, options = {}) {
  const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 200, maxWaitTimeInMs: 200, ...options })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topics: [TOPIC], fromBeginning: true })
    await consumer.run({
      autoCommit: true,
      eachMessage: async ({ partition, message }) => {
        got.push({
          partition,
          offset: Number(message.offset),
          key: message.key && message.key.toString(),
          value: message.value && message.value.toString(),
        })
      },
    })
    await until(`${group} consuming ${TOPIC}`, async () => {
      if (done(got)) return true
      await new Promise(resolve => setTimeout(resolve, 50))
      return false
    })
    // Commits what it read (autoCommit may not have by now).
    const next = {}
    for (const m of got) next[m.partition] = Math.max(next[m.partition] || 0, m.offset + 1)
    await consumer.commitOffsets(Object.entries(next).map(([partition, offset]) =>
      ({ topic: TOPIC, partition: Number(partition), offset: String(offset) })))
    if (stay) await stay()
  } finally {
    await consumer.disconnect()
  }
  return got
}

// readAll reads partition from its start up to offset end-1 (a group of its
// own, so from the beginning).
async function readAll (partition, end, reader) {
  const got = await consume(`${GROUP}-${reader}`, msgs => msgs.some(m => m.partition === partition && m.offset >= end - 1))
  return got.filter(m => m.partition === partition).sort((a, b) => a.offset - b.offset)
}

async function describeConfig (name) {
  const res = await withAdmin(a => a.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: TOPIC, configNames: [name] }],
    includeSynonyms: false,
  }))
  const r = res.resources[0]
  check(r.errorCode === 0, `describeConfigs ${TOPIC}: error ${r.errorCode} ${r.errorMessage}`)
  const entry = r.configEntries.find(e => e.configName === name)
  check(entry, `describeConfigs ${TOPIC}: no ${name} in ${JSON.stringify(r.configEntries)}`)
  return entry
}

const operations = {
  // Over SASL (security_test.go): produce five records, read them back as
  // a group.
  async scram () {
    const want = [0, 1, 2, 3, 4].map(i => `${process.env.WEIR_SASL_MECHANISM}-${i}`)
    await produce(want.map(value => ({ value, partition: 0 })))
    const got = await consume(GROUP, msgs => msgs.length >= want.length)
    const values = got.sort((a, b) => a.offset - b.offset).map(m => m.value)
    check(JSON.stringify(values) === JSON.stringify(want), `consumed ${values}, want ${want}`)
  },

  // With a wrong password: connecting fails with KafkaJS's SASL
  // authentication error (the broker's SASL_AUTHENTICATION_FAILED).
  async 'scram-refused' () {
    const producer = kafka.producer()
    try {
      await producer.connect()
    } catch (err) {
      log(`connect refused: ${err.name}: ${err.message}`)
      check(err.name === 'KafkaJSSASLAuthenticationError', `connect failed with ${err.name} (${err.message}), want KafkaJSSASLAuthenticationError`)
      return
    } finally {
      await producer.disconnect()
    }
    throw new CheckFailed('connected with a wrong password')
  },

  async smoke () {
    await create(3)
    const want = []
    for (let i = 0; i < 20; i++) want.push({ key: `k${String(i).padStart(2, '0')}`, value: `v${String(i).padStart(2, '0')}` })
    await produce(want)
    const got = await consume(GROUP, msgs => msgs.length >= 20)
    const pairs = got.map(m => `${m.key}=${m.value}`).sort()
    check(JSON.stringify(pairs) === JSON.stringify(want.map(m => `${m.key}=${m.value}`)), `consumed ${pairs}`)
  },

  async configs () {
    await create(1)
    await withAdmin(a => a.alterConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: TOPIC, configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
    }))
    const entry = await describeConfig('retention.ms')
    log(`retention.ms after alterConfigs: ${JSON.stringify(entry)}`)
    check(entry.configValue === '7200000', `retention.ms reads back ${entry.configValue}, want 7200000`)
  },

  async brokerconfigs () {
    const res = await withAdmin(a => a.describeConfigs({
      resources: [{ type: ConfigResourceTypes.BROKER, name: '0' }],
      includeSynonyms: false,
    }))
    const r = res.resources[0]
    check(r.errorCode === 0, `describeConfigs broker 0: error ${r.errorCode} ${r.errorMessage}`)
    const entry = r.configEntries.find(e => e.configName === 'num.partitions')
    log(`broker 0: ${r.configEntries.length} configs, num.partitions=${entry && entry.configValue}`)
    check(entry && entry.configValue, `describeConfigs broker 0: no num.partitions in ${r.configEntries.map(e => e.configName)}`)
  },

  async partitions () {
    await create(1)
    await withAdmin(a => a.createPartitions({ topicPartitions: [{ topic: TOPIC, count: 3 }] }))
    await until(`metadata showing 3 partitions of ${TOPIC}`, async () => {
      const md = await withAdmin(a => a.fetchTopicMetadata({ topics: [TOPIC] }))
      return md.topics[0].partitions.length === 3
    })
    const [meta] = await produce([{ key: 'p2', value: 'in partition 2', partition: 2 }])
    check(meta.partition === 2 && meta.baseOffset === '0', `produced to ${JSON.stringify(meta)}`)
    const got = await readAll(2, 1, 'p2')
    check(got.length === 1 && got[0].key === 'p2' && got[0].value === 'in partition 2', `partition 2 holds ${JSON.stringify(got)}`)
  },

  async deleterecords () {
    await create(1)
    const msgs = []
    for (let i = 0; i < 10; i++) msgs.push({ key: `k${i}`, value: `v${i}` })
    await produce(msgs)
    await withAdmin(async a => {
      // deleteTopicRecords looks the leader up in the admin's metadata cache
      // without loading it first ("Topic metadata not loaded" otherwise).
      await a.fetchTopicMetadata({ topics: [TOPIC] })
      await a.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: '5' }] })
    })
    const [offsets] = await withAdmin(a => a.fetchTopicOffsets(TOPIC))
    log(`offsets after deleteTopicRecords: ${JSON.stringify(offsets)}`)
    check(offsets.low === '5' && offsets.high === '10', `offsets ${JSON.stringify(offsets)}, want low 5, high 10`)
    const got = await readAll(0, 10, 'all')
    check(got.length === 5 && got[0].offset === 5 && got[0].value === 'v5', `read from the beginning: ${JSON.stringify(got)}`)
  },

  async compaction () {
    await create(1, { 'cleanup.policy': 'compact', 'segment.bytes': '1024', 'segment.ms': '100', 'min.cleanable.dirty.ratio': '0.01' })
    for (let r = 0; r < COMPACT_ROUNDS; r++) {
      const msgs = []
      for (let k = 0; k < COMPACT_KEYS; k++) msgs.push({ key: `key${k}`, value: `key${k}-r${r}` })
      await produce(msgs)
    }
    const want = []
    for (let k = 0; k < COMPACT_KEYS; k++) want.push(`key${k}=key${k}-r${COMPACT_ROUNDS - 1}`)
    let pass = 0
    await until(`${TOPIC} compacted to the last value of each key`, async () => {
      // A record of the filler key rolls the segment holding the last round
      // (segment.ms), so the cleaner may clean all of it.
      const [meta] = await produce([{ key: FILLER, value: 'f' }])
      const got = (await readAll(0, Number(meta.baseOffset) + 1, `pass${pass++}`))
        .filter(m => m.key !== FILLER).map(m => `${m.key}=${m.value}`)
      if (JSON.stringify(got.sort()) !== JSON.stringify(want.slice().sort())) return false
      log(`compacted: ${got.length} records of ${COMPACT_KEYS} keys left of ${COMPACT_KEYS * COMPACT_ROUNDS}, after ${pass} reads`)
      return true
    })
  },

  async internal () {
    await create(1)
    await produce([{ key: 'k', value: 'v' }])
    await consume(GROUP, msgs => msgs.length >= 1) // a group's commit: Kafka creates __consumer_offsets for it
    const topics = await withAdmin(a => a.listTopics())
    check(topics.includes('__consumer_offsets'), `__consumer_offsets not listed: ${topics}`)
    // fetchTopicMetadata drops the internal flag: the Go test checks it.
    let err = null
    try {
      await produce([{ key: 'k', value: 'written by a client' }], '__consumer_offsets')
    } catch (e) {
      err = e
    }
    check(err !== null, 'a produce to __consumer_offsets succeeded')
    log(`produce to __consumer_offsets refused: ${err.name}: ${err.message}`)
  },

  async groups () {
    await create(1)
    await produce([0, 1, 2].map(i => ({ key: `k${i}`, value: `v${i}` })))
    await consume(GROUP, msgs => msgs.length >= 3, async () => {
      const { groups } = await withAdmin(a => a.listGroups())
      const listed = groups.find(g => g.groupId === GROUP)
      check(listed && listed.protocolType === 'consumer', `listGroups: ${GROUP} is ${JSON.stringify(listed)} in ${JSON.stringify(groups)}`)
      const { groups: [g] } = await withAdmin(a => a.describeGroups([GROUP]))
      log(`describeGroups: ${g.groupId} ${g.state} ${g.protocolType} ${g.protocol}, ${g.members.length} member(s)`)
      check(g.errorCode === 0 && g.protocolType === 'consumer', `describeGroups ${GROUP}: ${JSON.stringify(g)}`)
      check(g.state === 'Stable' && g.protocol && g.members.length === 1, `describeGroups ${GROUP}: ${JSON.stringify(g)}`)
    })
  },

  // Three transactions of five records each: committed, aborted, committed.
  // A read_committed consumer (KafkaJS's default) sees the ten committed
  // records, a read_uncommitted one all fifteen.
  async transactions () {
    await create(1)
    const producer = kafka.producer({ transactionalId: `${TOPIC}-tx`, maxInFlightRequests: 1, idempotent: true })
    await producer.connect()
    try {
      for (const [name, commit] of [['c0', true], ['a', false], ['c1', true]]) {
        const txn = await producer.transaction()
        const messages = []
        for (let i = 0; i < 5; i++) messages.push({ key: `${name}-${i}`, value: `${name}-${i}`, partition: 0 })
        await txn.send({ topic: TOPIC, messages })
        await (commit ? txn.commit() : txn.abort())
      }
    } finally {
      await producer.disconnect()
    }
    // Offsets: c0 0-4, marker 5, a 6-10, marker 11, c1 12-16, marker 17.
    const values = msgs => msgs.sort((a, b) => a.offset - b.offset).map(m => m.value)
    const upTo16 = msgs => msgs.some(m => m.offset >= 16)
    const committed = values(await consume(`${GROUP}-committed`, upTo16))
    let want = ['c0', 'c1'].flatMap(n => [0, 1, 2, 3, 4].map(i => `${n}-${i}`))
    check(JSON.stringify(committed) === JSON.stringify(want), `read_committed read ${committed}, want ${want}`)
    const uncommitted = values(await consume(`${GROUP}-uncommitted`, upTo16, undefined, { readUncommitted: true }))
    want = ['c0', 'a', 'c1'].flatMap(n => [0, 1, 2, 3, 4].map(i => `${n}-${i}`))
    check(JSON.stringify(uncommitted) === JSON.stringify(want), `read_uncommitted read ${uncommitted}, want ${want}`)
  },

  // After the broker restarted: the groups operation's group (TOPIC is its
  // topic), now empty.
  async restart () {
    const { groups } = await withAdmin(a => a.listGroups())
    const listed = groups.find(g => g.groupId === GROUP)
    check(listed && listed.protocolType === 'consumer', `listGroups: ${GROUP} is ${JSON.stringify(listed)} in ${JSON.stringify(groups)}`)
    const { groups: [g] } = await withAdmin(a => a.describeGroups([GROUP]))
    log(`describeGroups after the restart: ${JSON.stringify(g)}`)
    check(g.errorCode === 0 && g.protocolType === 'consumer' && g.state === 'Empty' && g.members.length === 0,
      `describeGroups ${GROUP}: ${JSON.stringify(g)}`)
    const offsets = await withAdmin(a => a.fetchOffsets({ groupId: GROUP, topics: [TOPIC] }))
    const p0 = offsets[0].partitions.find(p => p.partition === 0)
    check(p0 && p0.offset === '3', `fetchOffsets ${GROUP}: ${JSON.stringify(offsets)}, want ${TOPIC}/0 at 3`)
  },
}

operations[OP]().then(
  () => log(`kafkajs ${OP}: ok`),
  err => {
    console.error(err instanceof CheckFailed ? `FAIL: ${err.message}` : err)
    process.exit(1)
  })
