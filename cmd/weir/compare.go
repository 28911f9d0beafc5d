package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weir-broker/weir/harness/compare"
)

const compareLong = `Compare two runs of the experiment harness, benchstat style. A and B are
results directories (holding run.json) or run.json files; A is the baseline.

For every section and point both runs have, and every metric either run
recorded there, weir compare prints:
  A, B    the median of the successful repetitions ± the median absolute
          deviation as a percentage of the median
  delta   the change of the median from A to B, in percent
  p       the p-value of a two-sided Mann-Whitney U test over the
          repetitions, and how many each side had (p=0.008 n=5+5)
  note    "better" or "worse" for a significant change of a metric with a
          direction, "need >= 4 reps" when both sides have too few
          repetitions for any difference to be significant, "only in A"
          or "only in B" for a metric one run lacks

"~" in the delta column means no significant difference: p > 0.05, so the
repetitions do not show that the medians differ, whatever the two numbers
say. Differences between the two environments (commit, kernel, file system,
device, seed ...) are printed first, and points or sections only one run
has are listed after the tables.

The exit status is 0 whatever the comparison finds, and 1 when a run cannot
be read.`

func newCompareCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "compare [--format text|md] A B",
		Short: "Compare two experiment runs, with a significance test per metric",
		Long:  compareLong,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != compare.FormatText && format != compare.FormatMarkdown {
				return fmt.Errorf("%w %q: want %s or %s", compare.ErrFormat, format, compare.FormatText, compare.FormatMarkdown)
			}
			a, err := compare.Load(args[0])
			if err != nil {
				return err
			}
			b, err := compare.Load(args[1])
			if err != nil {
				return err
			}
			res, err := compare.Compare(compare.Side{Label: args[0], Run: a}, compare.Side{Label: args[1], Run: b})
			if err != nil {
				return err
			}
			return res.Write(cmd.OutOrStdout(), format)
		},
	}
	cmd.Flags().StringVar(&format, "format", compare.FormatText, "output format: text (terminal tables) or md (Markdown)")
	return cmd
}
