// A strict little XML reader for the tests: checks that a document (the SVG we write, or
// the HTML report's XML-shaped parts) is well formed and lists its elements.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace perseus::testing {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // values unescaped
  std::string text;                               // direct character data, unescaped
  int depth = 0;
  std::vector<std::string> ancestors;             // names, outermost first
  double number(const std::string& attribute) const { return std::stod(attributes.at(attribute)); }
  bool has_class(const std::string& cls) const {
    const auto it = attributes.find("class");
    if (it == attributes.end()) return false;
    const std::string padded = " " + it->second + " ";
    return padded.find(" " + cls + " ") != std::string::npos;
  }
};

inline std::string xml_unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const std::size_t end = s.find(';', i);
    if (end == std::string::npos) throw std::runtime_error("unterminated entity");
    const std::string entity = s.substr(i + 1, end - i - 1);
    if (entity == "amp") out += '&';
    else if (entity == "lt") out += '<';
    else if (entity == "gt") out += '>';
    else if (entity == "quot") out += '"';
    else if (entity == "#39") out += '\'';
    else if (entity == "times") out += "\xc3\x97";
    else throw std::runtime_error("unknown entity &" + entity + ";");
    i = end;
  }
  return out;
}

// Elements in document order. Throws std::runtime_error on anything not well formed:
// unbalanced or mismatched tags, unquoted or repeated attributes, a bare '<' or '&'.
inline std::vector<XmlElement> parse_xml(const std::string& doc, const std::vector<std::string>& void_elements = {}) {
  std::vector<XmlElement> elements;
  std::vector<std::size_t> open;  // indices into elements
  std::size_t i = 0;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i) + ": " + doc.substr(i, 60));
  };
  while (i < doc.size()) {
    if (doc[i] != '<') {
      const std::size_t next = doc.find('<', i);
      const std::string text = doc.substr(i, next == std::string::npos ? std::string::npos : next - i);
      if (!open.empty()) elements[open.back()].text += xml_unescape(text);
      if (next == std::string::npos) break;
      i = next;
      continue;
    }
    if (doc.compare(i, 4, "<!--") == 0) {
      i = doc.find("-->", i);
      if (i == std::string::npos) fail("unterminated comment");
      i += 3;
      continue;
    }
    if (doc.compare(i, 2, "<!") == 0 || doc.compare(i, 2, "<?") == 0) {
      i = doc.find('>', i) + 1;
      continue;
    }
    if (doc.compare(i, 2, "</") == 0) {
      const std::size_t end = doc.find('>', i);
      if (end == std::string::npos) fail("unterminated end tag");
      const std::string name = doc.substr(i + 2, end - i - 2);
      if (open.empty() || elements[open.back()].name != name) fail("mismatched </" + name + ">");
      open.pop_back();
      i = end + 1;
      continue;
    }
    XmlElement e;
    std::size_t j = i + 1;
    while (j < doc.size() && (std::isalnum(static_cast<unsigned char>(doc[j])) || doc[j] == '-' || doc[j] == ':')) ++j;
    e.name = doc.substr(i + 1, j - i - 1);
    if (e.name.empty()) fail("bare '<'");
    bool self_closing = false;
    while (true) {
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) fail("unterminated tag");
      if (doc[j] == '>') {
        ++j;
        break;
      }
      if (doc.compare(j, 2, "/>") == 0) {
        self_closing = true;
        j += 2;
        break;
      }
      std::size_t k = j;
      while (k < doc.size() && doc[k] != '=' && doc[k] != '>' && !std::isspace(static_cast<unsigned char>(doc[k]))) ++k;
      const std::string attribute = doc.substr(j, k - j);
      if (k >= doc.size() || doc[k] != '=' || k + 1 >= doc.size() || doc[k + 1] != '"') {
        i = j;
        fail("attribute without a quoted value");
      }
      const std::size_t close = doc.find('"', k + 2);
      if (close == std::string::npos) fail("unterminated attribute");
      if (!e.attributes.emplace(attribute, xml_unescape(doc.substr(k + 2, close - k - 2))).second) {
        fail("repeated attribute " + attribute);
      }
      j = close + 1;
    }
    e.depth = static_cast<int>(open.size());
    for (std::size_t o : open) e.ancestors.push_back(elements[o].name);
    elements.push_back(std::move(e));
    bool is_void = false;
    for (const std::string& v : void_elements) is_void |= v == elements.back().name;
    if (!self_closing && !is_void) open.push_back(elements.size() - 1);
    i = j;
  }
  if (!open.empty()) throw std::runtime_error("unclosed <" + elements[open.back()].name + ">");
  return elements;
}

}  // namespace perseus::testing
