# frozen_string_literal: true

require_relative 'helper'

# The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
# deadline module): each value, in seconds, as execute's timeout:. answers: the GET answers;
# accepted: it answers or times out (a deadline too short for a busy machine); refused:
# SentinelRecovery::Error with code config whose detail starts "timeout must be", nothing sent.
class TestTimeoutCases < Minitest::Test
  def test_shared_timeout_cases
    SentinelRecovery::Client.open(SHARED.url) do |c|
      c.ready
      case_rows('timeouts.tsv', 3, 8).each do |value_ms, expect, why|
        seconds = { 'NaN' => Float::NAN, 'inf' => Float::INFINITY }.fetch(value_ms) { Float(value_ms) } / 1000
        outcome = begin
          c.execute('GET', 'timeout-case:absent', timeout: seconds)
        rescue SentinelRecovery::Error => e
          e
        end
        if expect == 'answers' || (expect == 'accepted' && !(outcome.is_a?(SentinelRecovery::Error) && outcome.code == 'timeout'))
          assert_nil outcome, "#{value_ms} ms (#{why})"
        else
          assert_equal 'refused', expect, "#{value_ms} ms (#{why})"
          assert_kind_of SentinelRecovery::Error, outcome, "#{value_ms} ms (#{why})"
          assert_equal 'config', outcome.code, "#{value_ms} ms (#{why})"
          assert outcome.detail.start_with?('timeout must be'), "#{value_ms} ms: #{outcome.message}"
        end
      end
    end
  end
end
