package assignor

import (
	"cmp"
	"slices"
)

type uniform struct{}

func (uniform) Name() string { return "uniform" }

// Assign keeps every member's current partitions that it still subscribes
// to, hands the rest, topic by topic (topics with the fewest subscribers
// first), to the least loaded subscriber, and then moves partitions from the
// most loaded members to subscribers holding at least two fewer until no
// such move is left. Each move lowers the sum of squared loads, so it ends;
// with identical subscriptions it ends with loads differing by at most one.
func (uniform) Assign(s Spec) Assignment {
	order := sortedMembers(s)
	rank := make([]int, len(s.Members))
	for r, i := range order {
		rank[i] = r
	}
	topics := sortedTopics(s)
	subs := make(map[[16]byte][]int, len(topics))
	for _, i := range order {
		for _, id := range s.Members[i].Topics {
			if _, ok := s.Topics[id]; ok && !slices.Contains(subs[id], i) {
				subs[id] = append(subs[id], i)
			}
		}
	}
	owner := map[tp]int{}
	load := make([]int, len(s.Members))

	// Sticky: keep what is still valid.
	for _, i := range order {
		m := s.Members[i]
		for _, t := range topics {
			if !subscribes(m, t.ID) {
				continue
			}
			for _, p := range m.Current[t.ID] {
				k := tp{t.ID, p}
				if _, taken := owner[k]; taken || p < 0 || p >= t.Partitions {
					continue
				}
				owner[k] = i
				load[i]++
			}
		}
	}

	// The least loaded of candidates, ties to the lowest member id.
	least := func(cands []int) int {
		best := -1
		for _, j := range cands {
			if best < 0 || load[j] < load[best] || load[j] == load[best] && rank[j] < rank[best] {
				best = j
			}
		}
		return best
	}

	// Unowned partitions, the most constrained topics first.
	byNeed := slices.Clone(topics)
	slices.SortStableFunc(byNeed, func(a, b Topic) int { return cmp.Compare(len(subs[a.ID]), len(subs[b.ID])) })
	for _, t := range byNeed {
		if len(subs[t.ID]) == 0 {
			continue
		}
		for p := range t.Partitions {
			k := tp{t.ID, p}
			if _, taken := owner[k]; taken {
				continue
			}
			j := least(subs[t.ID])
			owner[k] = j
			load[j]++
		}
	}

	// Balance: move from the most loaded while a subscriber has two fewer.
	for {
		byLoad := slices.Clone(order)
		slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(load[b], load[a]) })
		moved := false
		for _, a := range byLoad {
			var from tp
			to := -1
			for _, t := range topics {
				j := least(subs[t.ID])
				if j < 0 || load[j] > load[a]-2 || to >= 0 && load[j] >= load[to] {
					continue
				}
				// a's highest partition of t, if any.
				for p := t.Partitions - 1; p >= 0; p-- {
					if o, ok := owner[tp{t.ID, p}]; ok && o == a {
						from, to = tp{t.ID, p}, j
						break
					}
				}
			}
			if to >= 0 {
				owner[from] = to
				load[a]--
				load[to]++
				moved = true
				break
			}
		}
		if !moved {
			break
		}
	}
	return build(s, owner)
}
