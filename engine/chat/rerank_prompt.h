#pragma once
// A decoder reranker's prompt: the model's tokenizer.chat_template.rerank (Qwen3-Reranker's "Judge
// whether the Document meets the requirements…") with the query and the document put where its
// {query} and {document} placeholders stand, as llama-server lays a rerank pair out.

#include <string>
#include <string_view>

#include "pagoda/chat.h"

namespace pagoda {

// The template with every "{query}" and "{document}" replaced in one pass over the template, so
// a query that contains "{document}" stays the query's text. The inserted texts are the prompt's
// data spans: their control-token spellings stay plain text when tokenized.
ChatPrompt render_rerank_prompt(std::string_view rerank_template, std::string_view query, std::string_view document);

}  // namespace pagoda
