package assignor

import "slices"

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

// Assign works topic by topic: the members subscribed to it, sorted by id,
// have quotas of partitions/members, the first partitions%members one more;
// each keeps its current partitions of the topic up to its quota, and the
// rest go, in ascending order, to the members below quota in member order.
// Started afresh, member i of n gets the i-th contiguous range of every topic
// it subscribes to, so members with the same subscription get the same
// partition numbers of co-partitioned topics.
func (rangeAssignor) Assign(s Spec) Assignment {
	order := sortedMembers(s)
	owner := map[tp]int{}
	for _, t := range sortedTopics(s) {
		var subs []int
		for _, i := range order {
			if subscribes(s.Members[i], t.ID) {
				subs = append(subs, i)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int32(len(subs))
		quota := make([]int32, n)
		for pos := range quota {
			quota[pos] = t.Partitions / n
			if int32(pos) < t.Partitions%n {
				quota[pos]++
			}
		}
		count := make([]int32, n)
		for pos, i := range subs {
			cur := slices.Clone(s.Members[i].Current[t.ID])
			slices.Sort(cur)
			for _, p := range cur {
				k := tp{t.ID, p}
				if _, taken := owner[k]; taken || p < 0 || p >= t.Partitions || count[pos] >= quota[pos] {
					continue
				}
				owner[k] = i
				count[pos]++
			}
		}
		next := 0
		for p := range t.Partitions {
			k := tp{t.ID, p}
			if _, taken := owner[k]; taken {
				continue
			}
			for count[next] >= quota[next] {
				next++
			}
			owner[k] = subs[next]
			count[next]++
		}
	}
	return build(s, owner)
}
