// Package transport will speak the Kafka wire protocol for the broker: framing,
// request and response headers, one file per API with its served version range
// registered in one place, and the Fetch writer that sends segment bytes with
// sendfile. It depends on core, never the other way round.
package transport
