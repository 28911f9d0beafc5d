// Package harness will run reproducible experiments against weir (or any Kafka
// bootstrap address): disk and memory probes, produce/consume throughput and
// latency across codecs, partitioners, flush policies and acks, with
// statistics, Markdown tables and SVG plots written under results/.
package harness
