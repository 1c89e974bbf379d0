# frozen_string_literal: true

require_relative 'helper'

# The shared argument text cases (tests/cases/arguments.tsv; the policy lives in the core's
# arguments module): each number as an Integer or Float argument of ECHO, and what the server
# echoes, or the config error naming the argument for NaN. Ruby has no 32-bit float: those
# cases are skipped.
class TestArgumentCases < Minitest::Test
  SPECIAL = { 'inf' => Float::INFINITY, '-inf' => -Float::INFINITY, 'NaN' => Float::NAN }.freeze

  def test_shared_argument_cases
    SentinelRecovery::Client.open(SHARED.url) do |c|
      case_rows('arguments.tsv', 3, 19).each do |kind, value, text|
        next if kind == 'float32'

        line = "#{kind} #{value}"
        number = kind == 'int' ? Integer(value) : SPECIAL.fetch(value) { Float(value) }
        if text == 'refused'
          error = assert_raises(SentinelRecovery::Error) { c.execute('ECHO', number) }
          assert_equal 'config', error.code, line
          assert_equal 'argument 1 is NaN', error.detail, line
        else
          assert_equal text, c.execute('ECHO', number), line
        end
      end
    end
  end
end
