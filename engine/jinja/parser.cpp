// A recursive-descent parser following jinja2's parser.py, function for function.

#include "engine/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "engine/jinja/lexer.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// Deeper nesting than this (brackets, operators, blocks) is refused before it can exhaust the
// native stack, here or in the renderer that walks the tree.
constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_template() {
    Body body = parse_body({});
    return body;
  }

 private:
  // Raising the nesting depth for one parse function's duration.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("template nested too deeply");
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  [[noreturn]] void fail(const std::string& message) const {
    throw Error("template line " + std::to_string(cur().line) + ": " + message);
  }

  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }

  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Text: return "text";
      case TokenType::VariableBegin: return "'{{'";
      case TokenType::VariableEnd: return "end of print statement";
      case TokenType::BlockBegin: return "'{%'";
      case TokenType::BlockEnd: return "end of statement block";
      case TokenType::Name: return "'" + t.text + "'";
      case TokenType::String: return "string";
      case TokenType::Integer:
      case TokenType::Float: return "number " + t.text;
      case TokenType::Operator: return "'" + t.text + "'";
      case TokenType::End: return "end of template";
    }
    return "token";
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail("expected a name, got " + describe(cur()));
    std::string name = cur().text;
    next();
    return name;
  }

  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Statements until a {% tag named in `ends` (the stream is left on that name) or the end.
  Body parse_body(std::initializer_list<const char*> ends) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == TokenType::End) {
        if (ends.size() != 0) fail(std::string("unexpected end of template, expected '") + *ends.begin() + "'");
        return body;
      }
      if (tok.type == TokenType::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        next();
      } else if (tok.type == TokenType::VariableBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = tok.line;
        s->exprs.push_back(parse_tuple(true, {}));
        expect(TokenType::VariableEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (tok.type == TokenType::BlockBegin) {
        next();
        if (cur().type != TokenType::Name) fail("tag name expected");
        for (const char* end : ends) {
          if (cur().text == end) return body;
        }
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(tok));
      }
    }
  }

  void end_tag() { expect(TokenType::BlockEnd, "end of statement block"); }

  // After parse_body stopped on `name`: consumes it and the tag's end.
  void close(const char* name) {
    if (!skip_name(name)) fail(std::string("expected '") + name + "'");
    end_tag();
  }

  StmtPtr parse_statement() {
    const std::string tag = cur().text;
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    next();
    if (tag == "for") {
      parse_for(*s);
    } else if (tag == "if") {
      parse_if(*s);
    } else if (tag == "set") {
      parse_set(*s);
    } else if (tag == "macro") {
      parse_macro(*s);
    } else if (tag == "call") {
      parse_call_block(*s);
    } else if (tag == "filter") {
      s->kind = StmtKind::FilterBlock;
      parse_filter_chain(*s);
      end_tag();
      s->bodies.push_back(parse_body({"endfilter"}));
      close("endfilter");
    } else if (tag == "with" || tag == "block") {
      parse_with(*s, tag == "block");
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
      end_tag();
    } else {
      fail("unknown or unsupported tag '" + tag + "'");
    }
    return s;
  }

  void parse_for(Stmt& s) {
    s.kind = StmtKind::For;
    s.target = parse_target(false);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s.exprs.push_back(parse_tuple(false, {"recursive", "if"}));
    s.exprs.push_back(nullptr);
    if (skip_name("if")) s.exprs[1] = parse_expression(true);
    if (is_name("recursive")) fail("recursive loops are not supported");
    end_tag();
    ++loop_depth_;
    s.bodies.push_back(parse_body({"endfor", "else"}));
    --loop_depth_;
    if (skip_name("else")) {
      end_tag();
      s.bodies.push_back(parse_body({"endfor"}));
    }
    close("endfor");
  }

  void parse_if(Stmt& s) {
    s.kind = StmtKind::If;
    s.exprs.push_back(parse_tuple(false, {}));
    end_tag();
    while (true) {
      s.bodies.push_back(parse_body({"elif", "else", "endif"}));
      if (skip_name("elif")) {
        s.exprs.push_back(parse_tuple(false, {}));
        end_tag();
      } else if (skip_name("else")) {
        end_tag();
        s.bodies.push_back(parse_body({"endif"}));
        close("endif");
        return;
      } else {
        close("endif");
        return;
      }
    }
  }

  void parse_set(Stmt& s) {
    s.target = parse_target(true);
    if (skip_op("=")) {
      s.kind = StmtKind::Set;
      s.exprs.push_back(parse_tuple(true, {}));
      end_tag();
      return;
    }
    s.kind = StmtKind::SetBlock;
    if (is_op("|")) parse_filter_chain(s);
    end_tag();
    s.bodies.push_back(parse_body({"endset"}));
    close("endset");
  }

  // `| f(args) | g` after a filter block or block set, as Filter nodes whose input is null.
  void parse_filter_chain(Stmt& s) {
    bool first = s.kind == StmtKind::FilterBlock;
    while (first || is_op("|")) {
      if (!first) next();
      first = false;
      s.exprs.push_back(parse_filter_call(nullptr));
    }
  }

  void parse_params(std::vector<Param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    next();
  }

  void parse_macro(Stmt& s) {
    s.kind = StmtKind::Macro;
    s.name = expect_name();
    parse_params(s.params);
    end_tag();
    parse_macro_body(s, "endmacro");
  }

  // A macro's (or call block's) body, noting which of its special names it uses.
  void parse_macro_body(Stmt& s, const char* end) {
    const int saved = loop_depth_;
    loop_depth_ = 0;
    open_macros_.push_back(&s);
    s.bodies.push_back(parse_body({end}));
    open_macros_.pop_back();
    loop_depth_ = saved;
    close(end);
  }

  void parse_call_block(Stmt& s) {
    s.kind = StmtKind::CallBlock;
    if (is_op("(")) parse_params(s.params);
    ExprPtr call = parse_expression(true);
    if (call->kind != ExprKind::Call) fail("expected a call");
    s.exprs.push_back(std::move(call));
    end_tag();
    parse_macro_body(s, "endcall");
  }

  void parse_with(Stmt& s, bool block) {
    s.kind = StmtKind::With;
    if (block) {
      s.name = expect_name();
    } else {
      while (cur().type != TokenType::BlockEnd) {
        if (!s.params.empty()) expect_op(",");
        Param p;
        p.name = expect_name();
        expect_op("=");
        p.default_value = parse_expression(true);
        s.params.push_back(std::move(p));
      }
    }
    end_tag();
    const char* end = block ? "endblock" : "endwith";
    s.bodies.push_back(parse_body({end}));
    if (!skip_name(end)) fail(std::string("expected '") + end + "'");
    if (block) skip_name(s.name.c_str());
    end_tag();
  }

  Target parse_target(bool allow_attribute) {
    Target t;
    const bool parenthesized = skip_op("(");
    t.names.push_back(expect_name());
    if (allow_attribute && !parenthesized && skip_op(".")) {
      t.attribute = expect_name();
      return t;
    }
    while (skip_op(",")) {
      t.unpack = true;
      if (cur().type != TokenType::Name || is_name("in")) break;
      t.names.push_back(expect_name());
    }
    if (parenthesized) {
      expect_op(")");
      t.unpack = true;
    }
    return t;
  }

  // ---- expressions ----

  bool at_tuple_end(std::initializer_list<const char*> extra_ends) const {
    const Token& tok = cur();
    if (tok.type == TokenType::VariableEnd || tok.type == TokenType::BlockEnd || tok.type == TokenType::End)
      return true;
    if (tok.type == TokenType::Operator && (tok.text == ")" || tok.text == "]" || tok.text == "}")) return true;
    for (const char* end : extra_ends) {
      if (tok.type == TokenType::Name && tok.text == end) return true;
    }
    return false;
  }

  // Expressions separated by commas: one without a comma is itself, more make a tuple.
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_ends, bool parenthesized = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_tuple_end(extra_ends)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!parenthesized) fail("expected an expression, got " + describe(cur()));
    }
    auto e = node(ExprKind::TupleLiteral, line);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    const int line = cur().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto e = node(ExprKind::Conditional, line);
      e->items.push_back(parse_or());
      e->items.push_back(std::move(expr));
      e->items.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = node(ExprKind::Binary, line);
    e->name = op;
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    return e;
  }

  // One left-associative level of the grammar: operands from `operand` joined by any of `ops`
  // (operators, or keywords such as `and` when `keywords`), each join a Binary node on the
  // level's first line.
  ExprPtr left_assoc(ExprPtr (Parser::*operand)(), std::initializer_list<const char*> ops, bool keywords = false) {
    const int line = cur().line;
    ExprPtr left = (this->*operand)();
    for (;;) {
      const auto op =
          std::find_if(ops.begin(), ops.end(), [&](const char* o) { return keywords ? is_name(o) : is_op(o); });
      if (op == ops.end()) return left;
      next();
      left = binary(*op, std::move(left), (this->*operand)(), line);
    }
  }

  ExprPtr parse_or() { return left_assoc(&Parser::parse_and, {"or"}, true); }
  ExprPtr parse_and() { return left_assoc(&Parser::parse_not, {"and"}, true); }

  ExprPtr parse_not() {
    Nest nest(*this);
    const int line = cur().line;
    if (skip_name("not")) {
      auto e = node(ExprKind::Unary, line);
      e->name = "not";
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    auto e = node(ExprKind::Compare, line);
    e->items.push_back(std::move(first));
    while (true) {
      const Token& tok = cur();
      if (tok.type == TokenType::Operator && (tok.text == "==" || tok.text == "!=" || tok.text == "<" ||
                                              tok.text == ">" || tok.text == "<=" || tok.text == ">=")) {
        e->ops.push_back(tok.text);
        next();
      } else if (is_name("in")) {
        e->ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        e->ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      e->items.push_back(parse_math1());
    }
    if (e->ops.empty()) return std::move(e->items[0]);
    return e;
  }

  ExprPtr parse_math1() { return left_assoc(&Parser::parse_concat, {"+", "-"}); }
  ExprPtr parse_concat() { return left_assoc(&Parser::parse_math2, {"~"}); }
  ExprPtr parse_math2() { return left_assoc(&Parser::parse_pow, {"*", "/", "//", "%"}); }
  ExprPtr parse_pow() { return left_assoc(&Parser::parse_filtered_unary, {"**"}); }
  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(ExprKind::Unary, line);
      e->name = cur().text;
      next();
      e->items.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    switch (tok.type) {
      case TokenType::Name: {
        auto e = node(ExprKind::Literal, line);
        if (tok.text == "true" || tok.text == "True") {
          e->value = Value(true);
        } else if (tok.text == "false" || tok.text == "False") {
          e->value = Value(false);
        } else if (tok.text == "none" || tok.text == "None") {
          e->value = Value(None{});
        } else {
          e->kind = ExprKind::Name;
          e->name = tok.text;
          for (Stmt* m : open_macros_) {
            m->uses_varargs |= tok.text == "varargs";
            m->uses_kwargs |= tok.text == "kwargs";
            m->uses_caller |= tok.text == "caller";
          }
        }
        next();
        return e;
      }
      case TokenType::String: {
        std::string text;
        while (cur().type == TokenType::String) {  // adjacent literals concatenate
          text += cur().text;
          next();
        }
        auto e = node(ExprKind::Literal, line);
        e->value = Value(std::move(text));
        return e;
      }
      case TokenType::Integer: {
        auto e = node(ExprKind::Literal, line);
        e->value = Value(parse_integer(tok.text));
        next();
        return e;
      }
      case TokenType::Float: {
        auto e = node(ExprKind::Literal, line);
        e->value = Value(std::strtod(tok.text.c_str(), nullptr));
        next();
        return e;
      }
      case TokenType::Operator:
        if (tok.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (tok.text == "[") return parse_list();
        if (tok.text == "{") return parse_dict();
        break;
      default: break;
    }
    fail("unexpected " + describe(tok));
  }

  int64_t parse_integer(const std::string& text) {
    int base = 10;
    std::string digits = text;
    if (text.size() > 2 && text[0] == '0') {
      const char p = static_cast<char>(text[1] | 0x20);
      if (p == 'b' || p == 'o' || p == 'x') {
        base = p == 'b' ? 2 : (p == 'o' ? 8 : 16);
        digits = text.substr(2);
      }
    }
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) fail("integer literal " + text + " is too large");
    return v;
  }

  ExprPtr parse_list() {
    auto e = node(ExprKind::ListLiteral, cur().line);
    expect_op("[");
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_dict() {
    auto e = node(ExprKind::DictLiteral, cur().line);
    expect_op("{");
    while (!is_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const int line = cur().line;
      if (skip_op(".")) {
        if (cur().type == TokenType::Name) {
          auto a = node(ExprKind::Attribute, line);
          a->name = cur().text;
          a->items.push_back(std::move(e));
          next();
          e = std::move(a);
        } else if (cur().type == TokenType::Integer) {
          auto s = node(ExprKind::Subscript, line);
          auto index = node(ExprKind::Literal, line);
          index->value = Value(parse_integer(cur().text));
          next();
          s->items.push_back(std::move(e));
          s->items.push_back(std::move(index));
          e = std::move(s);
        } else {
          fail("expected a name or number after '.'");
        }
      } else if (skip_op("[")) {
        auto s = node(ExprKind::Subscript, line);
        s->items.push_back(std::move(e));
        s->items.push_back(parse_subscript());
        expect_op("]");
        e = std::move(s);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript() {
    const int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();
    auto s = node(ExprKind::Slice, line);
    s->items.push_back(std::move(start));
    s->items.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression(true));
    ExprPtr step;
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    s->items.push_back(std::move(step));
    return s;
  }

  // `(args)` after `callee`, into a Call node (or into `into`, a Filter or Test node).
  void parse_arguments(Expr& into) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (skip_op("**")) {
        into.keywords.emplace_back("**", parse_expression(true));
      } else if (skip_op("*")) {
        into.keywords.emplace_back("*", parse_expression(true));
      } else if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string name = cur().text;
        next();
        next();
        into.keywords.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!into.keywords.empty()) fail("positional argument after keyword argument");
        into.items.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node(ExprKind::Call, cur().line);
    c->items.push_back(std::move(callee));
    parse_arguments(*c);
    return c;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  // One `name(args)` of a filter chain, applied to `input`.
  ExprPtr parse_filter_call(ExprPtr input) {
    auto f = node(ExprKind::Filter, cur().line);
    f->name = dotted_name();
    f->items.push_back(std::move(input));
    if (is_op("(")) parse_arguments(*f);
    return f;
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter_call(std::move(e));
      } else if (is_name("is")) {
        next();
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr subject) {
    auto t = node(ExprKind::Test, cur().line);
    t->negated = skip_name("not");
    t->name = dotted_name();
    t->items.push_back(std::move(subject));
    const Token& tok = cur();
    if (is_op("(")) {
      parse_arguments(*t);
    } else if ((tok.type == TokenType::Name || tok.type == TokenType::String || tok.type == TokenType::Integer ||
                tok.type == TokenType::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      t->items.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Stmt*> open_macros_;  // the macros and call blocks being parsed, outermost first
};

}  // namespace

Body parse(std::string_view source) { return Parser(tokenize(source)).parse_template(); }

}  // namespace pagoda::jinja
