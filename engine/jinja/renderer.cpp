#include "engine/jinja/renderer.h"

#include "engine/jinja/filters.h"
#include "engine/jinja/methods.h"
#include "engine/jinja/operators.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// Nesting of statements and expressions being evaluated at once; the parser keeps templates
// shallower than this, so only macros calling macros come near it.
constexpr int kMaxNesting = 600;

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_int() && !v.is_bool()) throw Error("slice indices must be integers or None");
  return as_int(v);
}

}  // namespace

Renderer::Depth::Depth(Renderer& r) : r_(r) {
  if (++r_.depth_ > kMaxNesting) {
    --r_.depth_;
    throw Error("template recursion too deep");
  }
}

Renderer::Renderer(const Limits& limits, const Dict& globals) : budget_(limits), scope_(std::make_shared<Scope>()) {
  for (const auto& [k, v] : globals.items) {
    if (k.is_string()) scope_->vars[k.str()] = v;
  }
}

Value Renderer::render(const Body& body) {
  TextBuilder out;
  try {
    exec(body, out);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("template line ", 0) == 0) throw;
    throw Error("template line " + std::to_string(line_) + ": " + what);
  }
  return out.take();
}

void Renderer::append(TextBuilder& out, const std::string& text) {
  out.append_plain(text);
  budget_.check_size(out.size());
}

void Renderer::append(TextBuilder& out, const Value& text) {
  out.append(text);
  budget_.check_size(out.size());
}

Value Renderer::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value(Undefined{"'" + name + "' is undefined"});
}

void Renderer::assign(const Target& t, const Value& value) {
  if (!t.attribute.empty()) {
    const Value ns = lookup(t.names[0]);
    if (!ns.is_namespace()) throw Error("cannot assign attribute on non-namespace object");
    std::get<NamespacePtr>(ns.v)->attributes.set(Value(t.attribute), value);
    return;
  }
  if (!t.unpack) {
    scope_->vars[t.names[0]] = value;
    return;
  }
  const std::vector<Value> items = iterate(value);
  if (items.size() != t.names.size()) {
    throw Error(items.size() > t.names.size()
                    ? "too many values to unpack (expected " + std::to_string(t.names.size()) + ")"
                    : "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                          std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) scope_->vars[t.names[i]] = items[i];
}

void Renderer::exec(const Body& body, TextBuilder& out) {
  for (const StmtPtr& s : body) {
    exec(*s, out);
    if (flow_ != Flow::Normal) return;
  }
}

Value Renderer::render_body(const Body& body) {
  TextBuilder out;
  exec(body, out);
  return out.take();
}

Value Renderer::apply_filter_chain(const Stmt& s, Value value) {
  for (const ExprPtr& f : s.exprs) {
    Arguments args = eval_arguments(*f, 1);
    value = apply_filter(f->name, value, args, budget_);
  }
  return value;
}

void Renderer::exec(const Stmt& s, TextBuilder& out) {
  Depth depth(*this);
  line_ = s.line;
  budget_.step();
  switch (s.kind) {
    case StmtKind::Text: append(out, s.text); break;
    case StmtKind::Output: append(out, to_text(eval(*s.exprs[0]))); break;
    case StmtKind::If:
      for (size_t i = 0; i < s.bodies.size(); ++i) {
        if (i == s.exprs.size() || truthy(eval(*s.exprs[i]))) {
          exec(s.bodies[i], out);
          break;
        }
      }
      break;
    case StmtKind::For: exec_for(s, out); break;
    case StmtKind::Set: assign(s.target, eval(*s.exprs[0])); break;
    case StmtKind::SetBlock: assign(s.target, apply_filter_chain(s, render_body(s.bodies[0]))); break;
    case StmtKind::Macro: exec_macro_definition(s); break;
    case StmtKind::CallBlock: exec_call_block(s, out); break;
    case StmtKind::FilterBlock: append(out, to_text(apply_filter_chain(s, render_body(s.bodies[0])))); break;
    case StmtKind::With: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      for (const Param& p : s.params) inner->vars[p.name] = eval(*p.default_value);
      std::swap(scope_, inner);
      exec(s.bodies[0], out);
      std::swap(scope_, inner);
      break;
    }
    case StmtKind::Break: flow_ = Flow::Break; break;
    case StmtKind::Continue: flow_ = Flow::Continue; break;
  }
}

void Renderer::exec_for(const Stmt& s, TextBuilder& out) {
  const Value iterable = eval(*s.exprs[0]);
  std::vector<Value> items = iterate(iterable);
  const std::shared_ptr<Scope> outer = scope_;
  if (s.exprs[1]) {  // `for x in xs if cond`: the loop sees only the items that pass
    std::vector<Value> kept;
    for (const Value& item : items) {
      budget_.step();
      scope_ = std::make_shared<Scope>();
      scope_->parent = outer;
      assign(s.target, item);
      const bool keep = truthy(eval(*s.exprs[1]));
      scope_ = outer;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    budget_.step();
    scope_ = std::make_shared<Scope>();
    scope_->parent = outer;
    assign(s.target, items[static_cast<size_t>(i)]);
    Dict loop;
    loop.set(Value("index"), Value(i + 1));
    loop.set(Value("index0"), Value(i));
    loop.set(Value("revindex"), Value(n - i));
    loop.set(Value("revindex0"), Value(n - i - 1));
    loop.set(Value("first"), Value(i == 0));
    loop.set(Value("last"), Value(i == n - 1));
    loop.set(Value("length"), Value(n));
    loop.set(Value("depth"), Value(1));
    loop.set(Value("depth0"), Value(0));
    loop.set(Value("previtem"),
             i > 0 ? items[static_cast<size_t>(i - 1)] : Value(Undefined{"there is no previous item"}));
    loop.set(Value("nextitem"),
             i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value(Undefined{"there is no next item"}));
    loop.set(Value("cycle"), make_function("loop.cycle", [i](Arguments& a) {
               if (a.positional.empty()) throw Error("no items for cycling given");
               return a.positional[static_cast<size_t>(i) % a.positional.size()];
             }));
    scope_->vars["loop"] = make_dict(std::move(loop));
    try {
      exec(s.bodies[0], out);
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    const Flow flow = std::exchange(flow_, Flow::Normal);
    if (flow == Flow::Break) break;
  }
  if (n == 0 && s.bodies.size() > 1) exec(s.bodies[1], out);
}

void Renderer::exec_macro_definition(const Stmt& s) {
  const Stmt* macro = &s;
  // Only a weak reference to the defining scope: that scope holds the macro, so a strong one
  // would be a cycle that outlives the render.
  std::weak_ptr<Scope> weak = scope_;
  scope_->vars[s.name] =
      make_function(s.name, [this, macro, weak](Arguments& args) { return call_macro(*macro, weak.lock(), args); });
}

Value Renderer::call_macro(const Stmt& m, const std::shared_ptr<Scope>& closure, Arguments& args) {
  if (!closure) throw Error("macro '" + m.name + "' called after its scope ended");
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  std::vector<Value> extra_positional;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < m.params.size()) {
      scope->vars[m.params[i].name] = args.positional[i];
    } else {
      extra_positional.push_back(args.positional[i]);
    }
  }
  Dict extra_keywords;
  for (size_t n = 0; n < args.keyword.size(); ++n) {
    const auto& [k, v] = args.keyword[n];
    bool is_param = false;
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (m.params[i].name != k) continue;
      if (i < args.positional.size())
        throw Error("macro '" + m.name + "' got multiple values for argument '" + k + "'");
      is_param = true;
    }
    if (k == "caller" && !m.uses_caller) {
      throw Error("macro '" + m.name + "' was invoked with two values for the special caller argument");
    }
    if (is_param || k == "caller") {
      scope->vars[k] = v;
    } else if (!m.uses_kwargs) {
      throw Error("macro '" + m.name + "' takes no keyword argument '" + k + "'");
    } else {
      extra_keywords.set(args.keyword_name(n), v);
    }
  }
  if (!extra_positional.empty() && !m.uses_varargs) {
    throw Error("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
  }
  scope->vars["varargs"] = make_list(std::move(extra_positional), true);
  scope->vars["kwargs"] = make_dict(std::move(extra_keywords));
  if (++call_depth_ > budget_.limits().max_call_depth) {
    --call_depth_;
    throw Error("macro calls nested deeper than " + std::to_string(budget_.limits().max_call_depth));
  }
  std::shared_ptr<Scope> saved = scope_;
  const Flow saved_flow = flow_;
  const int saved_line = line_;
  scope_ = scope;
  TextBuilder out;
  try {
    for (const Param& p : m.params) {  // defaults see the parameters before them
      if (scope->vars.count(p.name)) continue;
      scope->vars[p.name] =
          p.default_value ? eval(*p.default_value) : Value(Undefined{"parameter '" + p.name + "' was not provided"});
    }
    exec(m.bodies[0], out);
  } catch (...) {
    scope_ = saved;
    --call_depth_;
    throw;
  }
  scope_ = saved;
  flow_ = saved_flow;
  line_ = saved_line;
  --call_depth_;
  return out.take();
}

void Renderer::exec_call_block(const Stmt& s, TextBuilder& out) {
  const std::shared_ptr<Scope> closure = scope_;
  // The caller is a macro made of the block's body and its parameters.
  Value caller = make_function("caller", [this, &s, closure](Arguments& args) { return call_macro(s, closure, args); });
  append(out, to_text(eval_call(*s.exprs[0], &caller)));
}

Arguments Renderer::eval_arguments(const Expr& e, size_t first_positional) {
  Arguments args;
  for (size_t i = first_positional; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i]));
  for (const auto& [name, expr] : e.keywords) {
    Value v = eval(*expr);
    if (name == "*") {
      for (Value& item : iterate(v)) args.positional.push_back(std::move(item));
    } else if (name == "**") {
      if (!v.is_dict()) throw Error("argument after ** must be a mapping, not " + type_name(v));
      for (const auto& [k, val] : v.dict().items) {
        if (!k.is_string()) throw Error("keywords must be strings");
        if (spans_of(k)) args.data_keywords.emplace_back(args.keyword.size(), k);
        args.keyword.emplace_back(k.str(), val);
      }
    } else {
      args.keyword.emplace_back(name, std::move(v));
    }
  }
  return args;
}

Value Renderer::call(const Value& callee, Arguments& args) {
  if (callee.is_function()) return std::get<FunctionPtr>(callee.v)->call(args);
  require_defined(callee);
  throw Error("'" + type_name(callee) + "' object is not callable");
}

Value Renderer::eval_call(const Expr& e, Value* caller) {
  const Value callee = eval(*e.items[0]);
  Arguments args = eval_arguments(e, 1);
  if (caller) args.keyword.emplace_back("caller", *caller);
  const int saved = line_;
  Value result = call(callee, args);
  line_ = saved;
  return result;
}

Value Renderer::eval(const Expr& e) {
  Depth depth(*this);
  line_ = e.line;
  budget_.step();
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::ListLiteral:
    case ExprKind::TupleLiteral: {
      std::vector<Value> items;
      for (const ExprPtr& item : e.items) items.push_back(eval(*item));
      return make_list(std::move(items), e.kind == ExprKind::TupleLiteral);
    }
    case ExprKind::DictLiteral: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        if (key.is_list() && !key.list().tuple) throw Error("unhashable type: 'list'");
        if (key.is_dict()) throw Error("unhashable type: 'dict'");
        d.set(key, eval(*e.items[i + 1]));
      }
      return make_dict(std::move(d));
    }
    case ExprKind::Attribute: return get_attribute(eval(*e.items[0]), e.name, budget_);
    case ExprKind::Subscript: {
      const Value obj = eval(*e.items[0]);
      const Expr& key = *e.items[1];
      if (key.kind == ExprKind::Slice) {
        auto bound = [&](size_t i) { return key.items[i] ? slice_bound(eval(*key.items[i])) : std::nullopt; };
        const auto start = bound(0), stop = bound(1), step = bound(2);
        require_defined(obj);
        return slice(obj, start, stop, step);
      }
      return get_item(obj, eval(key), budget_);
    }
    case ExprKind::Slice: throw Error("a slice outside a subscript");
    case ExprKind::Call: return eval_call(e, nullptr);
    case ExprKind::Filter: {
      const Value input = eval(*e.items[0]);
      const Arguments args = eval_arguments(e, 1);
      return apply_filter(e.name, input, args, budget_);
    }
    case ExprKind::Test: {
      const Value input = eval(*e.items[0]);
      const Arguments args = eval_arguments(e, 1);
      return Value(apply_test(e.name, input, args, budget_) != e.negated);
    }
    case ExprKind::Unary: {
      const Value operand = eval(*e.items[0]);
      if (e.name == "not") return Value(!truthy(operand));
      return unary_op(e.name, operand);
    }
    case ExprKind::Binary: {
      Value left = eval(*e.items[0]);
      if (e.name == "and") return truthy(left) ? eval(*e.items[1]) : left;
      if (e.name == "or") return truthy(left) ? left : eval(*e.items[1]);
      return binary_op(e.name, left, eval(*e.items[1]), budget_);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1]);
        if (!compare_op(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::Conditional:
      if (truthy(eval(*e.items[0]))) return eval(*e.items[1]);
      if (e.items[2]) return eval(*e.items[2]);
      return Value(Undefined{"the inline if-expression evaluated to false and no else section was defined"});
  }
  return Value();
}

}  // namespace pagoda::jinja
