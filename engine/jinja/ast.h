#pragma once
// The parsed template: expressions and statements as jinja2's parser builds them. One node type
// for each (a kind and the fields that kind uses) keeps the tree easy to walk.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja/value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Literal,       // value
  Name,          // name
  ListLiteral,   // items
  TupleLiteral,  // items
  DictLiteral,   // items: key, value, key, value, ...
  Attribute,     // items[0].name
  Subscript,     // items[0][items[1]]
  Slice,         // items: start, stop, step, each possibly null
  Call,          // items[0](items[1..], keywords)
  Filter,        // items[0] | name(items[1..], keywords)
  Test,          // items[0] is [not] name(items[1..], keywords)
  Unary,         // name ("-", "+", "not") items[0]
  Binary,        // items[0] name items[1]: + - * / // % ** ~ and or
  Compare,       // items[0] ops[0] items[1] ops[1] items[2] ...: == != < > <= >= in notin
  Conditional,   // items[1] if items[0] else items[2] (null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;
  bool negated = false;  // `is not`
};

// What `for` and `set` assign to: a name, a tuple of names, or a namespace's attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;    // `a, b` (or `(a, b)`)
  std::string attribute;  // `ns.attr`: names[0] is the namespace
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  Text,         // text
  Output,       // {{ exprs[0] }}
  If,           // exprs[i] guards bodies[i]; one more body than conditions is the else
  For,          // target in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
  Set,          // target = exprs[0]
  SetBlock,     // target = rendered bodies[0], through filters (exprs: Filter nodes on a null input)
  Macro,        // name(params) bodies[0]
  CallBlock,    // exprs[0] (a Call) with caller(params) = bodies[0]
  FilterBlock,  // bodies[0] rendered, through exprs (Filter nodes on a null input)
  With,         // params assigned in a new scope around bodies[0]
  Break,
  Continue,
};

struct Param {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  std::string name;
  Target target;
  std::vector<ExprPtr> exprs;
  std::vector<Param> params;
  std::vector<Body> bodies;
  // Macro and CallBlock: whether the body (or a macro nested in it) names varargs, kwargs or
  // caller; jinja2 refuses extra arguments, keywords or a call block otherwise.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

}  // namespace pagoda::jinja
