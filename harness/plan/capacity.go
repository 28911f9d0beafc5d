package plan

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// CapacityFile is Cruise Control's broker capacity configuration
// (capacity.json, or capacityJBOD.json when a broker has several disks):
// DISK in MB (per log directory for JBOD), CPU in percent, NW_IN and
// NW_OUT in KB/s, every value a string; broker "-1" is the default for
// brokers not listed (linkedin/cruise-control config/capacity.json).
type CapacityFile struct {
	BrokerCapacities []BrokerCapacity `json:"brokerCapacities"`
}

// BrokerCapacity is one broker's entry.
type BrokerCapacity struct {
	BrokerID string         `json:"brokerId"`
	Capacity map[string]any `json:"capacity"`
	Doc      string         `json:"doc"`
}

// LogDir names the JBOD log directories of the capacity file: disk i of
// a broker is LogDir + i.
const LogDir = "/var/lib/weir/data-"

// Capacity is the plan as Cruise Control's capacity file: the default
// entry and one per planned broker, ids firstID..firstID+N-1. DISK is the
// disk each broker is provisioned with (MiB), NW_IN and NW_OUT the NIC
// given or, without one, what the plan needs with its 40% headroom.
func (p *Plan) Capacity(firstID int) CapacityFile {
	kb := func(mbps float64) string { return strconv.FormatFloat(mbps*1024, 'f', 0, 64) }
	capacity := func() map[string]any {
		c := map[string]any{"CPU": "100", "NW_IN": kb(p.NetworkInMBps), "NW_OUT": kb(p.NetworkOutMBps)}
		disks := p.Hardware.DisksPerBroker
		if disks <= 1 {
			c["DISK"] = strconv.FormatFloat(p.DiskPerBrokerMiB, 'f', 0, 64)
		} else {
			dirs := map[string]string{}
			for i := range disks {
				dirs[LogDir+strconv.Itoa(i)] = strconv.FormatFloat(p.DiskPerBrokerMiB/float64(disks), 'f', 0, 64)
			}
			c["DISK"] = dirs
		}
		return c
	}
	f := CapacityFile{BrokerCapacities: []BrokerCapacity{{BrokerID: "-1", Capacity: capacity(),
		Doc: "Default capacity, from weir plan. Capacity unit used for disk is in MB, cpu is in percentage, network throughput is in KB."}}}
	for i := range p.Brokers {
		f.BrokerCapacities = append(f.BrokerCapacities, BrokerCapacity{BrokerID: strconv.Itoa(firstID + i), Capacity: capacity(),
			Doc: fmt.Sprintf("Planned broker %d of %d (weir plan).", i+1, p.Brokers)})
	}
	return f
}

// JSON is the capacity file's bytes, indented as Cruise Control's sample.
func (f CapacityFile) JSON() []byte {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic(err) // strings and maps of strings always encode
	}
	return append(b, '\n')
}
