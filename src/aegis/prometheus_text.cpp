#include "aegis/prometheus_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace zaya::aegis {

namespace {

bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// A cursor over one line; errors name the source, the line and the column.
struct LineReader {
  std::string_view s;
  size_t at = 0;
  const std::string& where;
  size_t line;

  [[noreturn]] void fail(const std::string& what) const {
    ZAYA_FAIL(where, ": line ", line, ", column ", at + 1, ": ", what, " in '",
              std::string(s.substr(0, 200)), "'");
  }
  bool done() const { return at >= s.size(); }
  char peek() const { return done() ? '\0' : s[at]; }
  void skip_spaces() {
    while (!done() && (s[at] == ' ' || s[at] == '\t')) ++at;
  }
  std::string name() {
    const size_t b = at;
    while (!done() && name_char(s[at], at == b)) ++at;
    if (at == b) fail("expected a metric or label name");
    return std::string(s.substr(b, at - b));
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at;
  }
  std::string quoted() {
    expect('"');
    std::string v;
    while (true) {
      if (done()) fail("unterminated label value");
      const char c = s[at++];
      if (c == '"') return v;
      if (c != '\\') {
        v += c;
        continue;
      }
      if (done()) fail("unterminated escape");
      const char e = s[at++];
      if (e == 'n')
        v += '\n';
      else if (e == '\\' || e == '"')
        v += e;
      else
        fail(std::string("unknown escape '\\") + e + "'");
    }
  }
  double number() {
    const size_t b = at;
    while (!done() && s[at] != ' ' && s[at] != '\t') ++at;
    const std::string t(s.substr(b, at - b));
    if (t == "+Inf" || t == "Inf") return HUGE_VAL;
    if (t == "-Inf") return -HUGE_VAL;
    if (t == "NaN") return std::nan("");
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0') {
      at = b;
      fail("expected a sample value");
    }
    return v;
  }
};

}  // namespace

std::string MetricSample::key() const {
  std::string k = name;
  if (labels.empty()) return k;
  k += '{';
  bool first = true;
  for (const auto& [n, v] : labels) {
    k += (first ? "" : ",") + n + "=\"" + v + "\"";
    first = false;
  }
  return k + '}';
}

std::vector<MetricSample> parse_prometheus_text(std::string_view text, const std::string& where) {
  std::vector<MetricSample> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineReader r{line, 0, where, line_no};
    r.skip_spaces();
    if (r.done() || r.peek() == '#') continue;
    MetricSample m;
    m.name = r.name();
    if (r.peek() == '{') {
      ++r.at;
      r.skip_spaces();
      while (r.peek() != '}') {
        const std::string label = r.name();
        r.skip_spaces();
        r.expect('=');
        r.skip_spaces();
        if (!m.labels.emplace(label, r.quoted()).second) r.fail("label '" + label + "' twice");
        r.skip_spaces();
        if (r.peek() == ',') {
          ++r.at;
          r.skip_spaces();
        } else if (r.peek() != '}') {
          r.fail("expected ',' or '}'");
        }
      }
      ++r.at;
    }
    r.skip_spaces();
    m.value = r.number();
    r.skip_spaces();
    if (!r.done()) r.number();  // an optional timestamp
    r.skip_spaces();
    if (!r.done()) r.fail("unexpected text after the sample");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace zaya::aegis
