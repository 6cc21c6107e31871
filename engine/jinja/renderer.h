#pragma once
// Walks a parsed template and prints it: jinja2's scoping (a for loop's body and a macro's body
// get scopes of their own, an if does not; namespace() objects carry values out of loops),
// loop variables, macros and call blocks, break/continue, all within a Budget.

#include <memory>
#include <string>
#include <unordered_map>

#include "engine/jinja/ast.h"
#include "engine/jinja/budget.h"
#include "engine/jinja/text_spans.h"
#include "engine/jinja/value.h"

namespace pagoda::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Renderer {
 public:
  // `globals` are the variables the template starts with (the context and the global functions).
  Renderer(const Limits& limits, const Dict& globals);

  // Errors come out as pagoda::Error "template line N: ...". The result's spans are the bytes
  // printed from data-carrying strings (see text_spans.h).
  Value render(const Body& body);

 private:
  enum class Flow { Normal, Break, Continue };

  // Counts nesting of exec/eval calls, so a deep template cannot exhaust the native stack.
  struct Depth {
    explicit Depth(Renderer& r);
    ~Depth() { --r_.depth_; }
    Renderer& r_;
  };

  void exec(const Body& body, TextBuilder& out);
  void exec(const Stmt& s, TextBuilder& out);
  void exec_for(const Stmt& s, TextBuilder& out);
  void exec_macro_definition(const Stmt& s);
  void exec_call_block(const Stmt& s, TextBuilder& out);
  Value render_body(const Body& body);
  Value apply_filter_chain(const Stmt& s, Value value);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e, Value* caller);
  Arguments eval_arguments(const Expr& e, size_t first_positional);
  Value call(const Value& callee, Arguments& args);
  Value call_macro(const Stmt& m, const std::shared_ptr<Scope>& closure, Arguments& args);

  Value lookup(const std::string& name) const;
  void assign(const Target& t, const Value& value);
  void append(TextBuilder& out, const Value& text);
  void append(TextBuilder& out, const std::string& text);

  Budget budget_;
  std::shared_ptr<Scope> scope_;
  Flow flow_ = Flow::Normal;
  int line_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
};

}  // namespace pagoda::jinja
