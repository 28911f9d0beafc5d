package logs

import "github.com/weir-broker/weir/core/producers"

// Producers lists the idempotent producers the partition knows, by id
// (DescribeProducers). Right after a truncation or reset the state may be
// the old log's until the next append rebuilds it.
func (p *Partition) Producers() []producers.Info { return p.prod.List() }
