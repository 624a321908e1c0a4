#include "query/cli/text_escape.h"

#include "gtest/gtest.h"

namespace memtrace::cli {
namespace {

TEST(TextEscapeTest, JsonQuotedEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuoted("job-1"), "\"job-1\"");
  EXPECT_EQ(JsonQuoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuoted("l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
  EXPECT_EQ(JsonQuoted(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuoted(std::string(1, '\0')), "\"\\u0000\"");
  EXPECT_EQ(JsonQuoted("r\xc3\xa9sum\xc3\xa9"), "\"r\xc3\xa9sum\xc3\xa9\"");  // UTF-8 kept
}

TEST(TextEscapeTest, CsvFieldQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("leak:cache"), "leak:cache");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
}

TEST(TextEscapeTest, XmlEscapedUsesEntitiesAndDropsCharactersXmlForbids) {
  EXPECT_EQ(XmlEscaped("<job a=\"1\" b='2'> & more"),
            "&lt;job a=&quot;1&quot; b=&apos;2&apos;&gt; &amp; more");
  EXPECT_EQ(XmlEscaped(std::string("a\x01\x1b"
                                   "b\tc\nd",
                                   8)),
            "ab\tc\nd");
}

TEST(TextEscapeTest, TerminalTextEscapesControlCharactersOnly) {
  EXPECT_EQ(TerminalText("run-7 \"a\\b\" \xc3\xa9"), "run-7 \"a\\b\" \xc3\xa9");
  EXPECT_EQ(TerminalText("new\nline\r\tend"), "new\\nline\\r\\tend");
  EXPECT_EQ(TerminalText(std::string("a\0b\x1b[31m\x7f", 9)), "a\\x00b\\x1b[31m\\x7f");
}

TEST(TextEscapeTest, ShellWordQuotesOnlyWhatTheShellWouldChange) {
  EXPECT_EQ(ShellWord("/usr/bin/python3"), "/usr/bin/python3");
  EXPECT_EQ(ShellWord("--nproc_per_node"), "--nproc_per_node");
  EXPECT_EQ(ShellWord("host-1:7431,a@b%c+d"), "host-1:7431,a@b%c+d");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellWord("two words"), "'two words'");
  EXPECT_EQ(ShellWord("FOO=bar"), "'FOO=bar'");
  EXPECT_EQ(ShellWord("$HOME `id` *.py ~ !x;y|z&"), "'$HOME `id` *.py ~ !x;y|z&'");
  EXPECT_EQ(ShellWord("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellWord("line\nbreak"), "'line\nbreak'");
}

}  // namespace
}  // namespace memtrace::cli
