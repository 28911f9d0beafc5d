package e2e_test

import (
	"fmt"
	"testing"
)

// TestCrossClientMatrix: what each client produces with each codec, every
// client (itself included) consumes intact. franz-go also reports the codec
// of the batch each record came in, which proves the producer really
// compressed and the broker stored the batch as it came.
func TestCrossClientMatrix(t *testing.T) {
	clients := clients
	if _, ok := findKcat(t); !ok {
		t.Log("kcat not found: the matrix runs without it (install the Debian package kcat, or run make deps)")
		clients = clients[:2]
	}
	b := startBroker(t, t.TempDir())
	addr := b.Addr()
	const n = 60
	for _, producer := range clients {
		for _, codec := range codecs {
			t.Run(producer.Name+"/"+codec.Name, func(t *testing.T) {
				topic := fmt.Sprintf("matrix-%s-%s", producer.Name, codec.Name)
				createTopic(t, addr, topic, 1, nil)
				want := textMessages(topic, n)
				producer.Produce(t, addr, topic, codec.Name, want)
				for _, consumer := range clients {
					got := consumer.Consume(t, addr, topic, n)
					sameMessages(t, producer.Name+" -> "+consumer.Name, got, want)
					if consumer.Name != "franz-go" {
						continue
					}
					for i, m := range got {
						if m.Codec != codec.ID {
							t.Errorf("record %d was stored with codec %d, want %d (%s)", i, m.Codec, codec.ID, codec.Name)
							break
						}
					}
				}
			})
		}
	}
}
