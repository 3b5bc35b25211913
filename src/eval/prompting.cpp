#include "eval/prompting.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stable_hash.h"
#include "engine/chat_template.h"

namespace klspec {
namespace {

struct Exemplar {
    std::string question;  // as the problem's prompt holds it
    std::string answer;    // a worked solution in the answer format the scorer reads
};

std::vector<nlohmann::json> read_rows(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("cannot read few-shot exemplars from {} (is --data-dir right?)", path));
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
    return rows;
}

// The k training rows with the smallest fnv1a64("klspec-fewshot/1:" + line), a fixed choice.
std::vector<nlohmann::json> seeded_rows(std::vector<nlohmann::json> rows, size_t k) {
    std::sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        return fnv1a64("klspec-fewshot/1:" + a.dump()) < fnv1a64("klspec-fewshot/1:" + b.dump());
    });
    if (rows.size() > k) rows.resize(k);
    return rows;
}

// GSM8K train solutions: calculator annotations "<<48/2=24>>" dropped, "#### 72" -> "The answer is 72.",
// the sentence the gsm8k scorer reads.
std::vector<Exemplar> gsm8k_exemplars(const std::string& data_dir, size_t k) {
    static const std::regex annotation("<<[^>]*>>");
    std::vector<Exemplar> out;
    for (const nlohmann::json& row : seeded_rows(read_rows(data_dir + "/gsm8k/train.jsonl"), k)) {
        std::string answer = std::regex_replace(row.at("answer").get<std::string>(), annotation, "");
        const size_t marker = answer.rfind("#### ");
        answer = answer.substr(0, marker) + "The answer is " + answer.substr(marker + 5) + ".";
        out.push_back({row.at("question").get<std::string>(), answer});
    }
    return out;
}

// MMLU-Pro's own CoT exemplars: its validation rows of the problem's category (5 per category).
std::vector<Exemplar> mmlu_pro_exemplars(const std::string& data_dir, const std::string& category, size_t k) {
    std::vector<Exemplar> out;
    for (const nlohmann::json& row : read_rows(data_dir + "/mmlu_pro/validation.jsonl")) {
        if (row.at("category") != category || out.size() == k) continue;
        std::string cot = row.at("cot_content").get<std::string>();
        if (cot.rfind("A: ", 0) == 0) cot = cot.substr(3);  // "A: Let's think step by step. ..."
        out.push_back({mmlu_pro_question(row), cot});
    }
    return out;
}

// One benchmark's conventions. Plain prompts follow the benchmark's usual few-shot format; chat prompts
// carry the instruction in the user turn.
struct Convention {
    std::string instruction;         // chat: before the question; plain: the prompt's head (may be empty)
    std::string question_prefix;     // plain: before each question
    std::string answer_prefix;       // plain: after each question
    int default_few_shot = 0;        // plain prompts
    std::vector<std::string> stops;  // plain prompts (under a chat template the turn's end stops it)
    // Chat: EvalPlus's instruct prompt (evalplus/provider/utility.py, make_raw_chat_prompt), with which the
    // Qwen2.5-Coder report and EvalPlus's leaderboard score instruct models: the task fenced after the
    // instruction, the assistant's turn opened with kEvalPlusResponse, the answer ending at the code's fence.
    bool evalplus_chat = false;
    // Where the answer starts in an output: the scorer reads what follows it (core/answer_scoring.h). None for
    // code, whose whole output is the answer.
    std::string answer_marker;
};

constexpr std::string_view kEvalPlusInstruction =
    "Please provide a self-contained Python script that solves the following problem in a markdown code block:";
constexpr std::string_view kEvalPlusResponse =
    "Below is a Python script with a self-contained function that solves the problem and passes corresponding "
    "tests:\n```python\n";

Convention convention_of(const std::string& dataset, const std::string& family) {
    if (dataset == "gsm8k")
        return {"Solve the math problem step by step. End with \"The answer is N.\" where N is the final number.",
                "Question: ",
                "\nAnswer:",
                8,
                {"\n\nQuestion:"},
                false,
                "The answer is"};
    if (dataset == "mmlu-pro")
        return {
            fmt::format("The following are multiple choice questions (with answers) about {}. Think step by step and "
                        "then finish your answer with \"the answer is (X)\" where X is the correct letter choice.",
                        family),
            "Question: ",
            "\nAnswer: Let's think step by step.",
            5,
            {"\n\nQuestion:"},
            false,
            "answer is"};
    if (dataset == "math500" || dataset == "math500-hard")
        return {"Solve the problem step by step, and put your final answer within \\boxed{}.",
                "Problem:\n",
                "\n\nSolution:",
                0,
                {"\n\nProblem:"},
                false,
                "\\boxed{"};
    if (dataset == "humaneval")  // plain: the prompt is continued as code; Codex's stop sequences end the function
        return {"", "", "", 0, {"\nclass ", "\ndef ", "\n#", "\nif __name__", "\nprint("}, true, ""};
    if (dataset == "mbpp-plus")  // the prompt holds EvalPlus's instruction already
        return {"", "", "", 0, {}, true, ""};
    return {};  // livecodebench prompts hold their instructions; JSONL files are used as written
}

// The user turn of an EvalPlus chat prompt: HumanEval's code prompt fenced after the instruction (MBPP+'s
// prompt is already written so).
std::string evalplus_user_turn(const std::string& dataset, const std::string& question) {
    if (dataset != "humaneval") return question;
    return fmt::format("{}\n```\n{}\n```\n", kEvalPlusInstruction, strip(question));
}

}  // namespace

ChatMode parse_chat_mode(const std::string& text) {
    if (text == "auto") return ChatMode::Auto;
    if (text == "on") return ChatMode::On;
    if (text == "off") return ChatMode::Off;
    throw Error(fmt::format("--chat must be auto, on or off, got '{}'", text));
}

PromptFormat format_prompts(std::vector<Problem>& problems, const std::string& dataset, const std::string& data_dir,
                            const PromptOptions& options, const Model& target) {
    PromptFormat format;
    const bool has_template = target.chat_template().has_value();
    if (options.chat == ChatMode::On && !has_template)
        throw Error(fmt::format("--chat on: {} has no chat template", target.path()));
    format.chat = options.chat == ChatMode::On || (options.chat == ChatMode::Auto && has_template);
    if (problems.empty()) return format;

    const Convention base = convention_of(dataset, problems.front().family);
    format.few_shot = options.few_shot.value_or(format.chat ? 0 : base.default_few_shot);
    if (format.few_shot < 0) throw Error("--few-shot must be >= 0");
    if (format.few_shot > 0 && dataset != "gsm8k" && dataset != "mmlu-pro")
        throw Error(fmt::format("--few-shot: klspec has exemplars for gsm8k and mmlu-pro only, not {}", dataset));
    if (!format.chat) format.stop_strings = base.stops;
    if (format.chat && base.evalplus_chat) format.stop_strings = {"\n```"};
    format.answer_marker = base.answer_marker;

    const std::optional<ChatTemplate> chat_template =
        format.chat ? std::optional<ChatTemplate>(std::in_place, target, "") : std::nullopt;
    std::vector<Exemplar> gsm8k_shots;
    if (dataset == "gsm8k" && format.few_shot > 0) gsm8k_shots = gsm8k_exemplars(data_dir, size_t(format.few_shot));
    std::map<std::string, std::vector<Exemplar>> mmlu_shots;  // by category
    for (Problem& problem : problems) {
        const Convention c = convention_of(dataset, problem.family);
        std::vector<Exemplar> shots = gsm8k_shots;
        if (dataset == "mmlu-pro" && format.few_shot > 0) {
            auto it = mmlu_shots.find(problem.family);
            if (it == mmlu_shots.end())
                it = mmlu_shots
                         .emplace(problem.family, mmlu_pro_exemplars(data_dir, problem.family, size_t(format.few_shot)))
                         .first;
            shots = it->second;
        }
        if (format.chat) {
            ChatMessages messages;
            const auto user = [&](const std::string& question) {
                return c.instruction.empty() ? question : c.instruction + "\n\n" + question;
            };
            for (const Exemplar& shot : shots) {
                messages.emplace_back("user", user(shot.question));
                messages.emplace_back("assistant", shot.answer);
            }
            if (c.evalplus_chat) {
                messages.emplace_back("user", evalplus_user_turn(dataset, problem.prompt));
                problem.prompt = chat_template->apply(messages) + std::string(kEvalPlusResponse);
            } else {
                messages.emplace_back("user", user(problem.prompt));
                problem.prompt = chat_template->apply(messages);
            }
        } else if (!c.question_prefix.empty() || !c.answer_prefix.empty()) {
            std::string prompt = c.instruction.empty() ? "" : c.instruction + "\n\n";
            for (const Exemplar& shot : shots)
                prompt += c.question_prefix + shot.question + c.answer_prefix + " " + shot.answer + "\n\n";
            problem.prompt = prompt + c.question_prefix + problem.prompt + c.answer_prefix;
        }
    }
    return format;
}

}  // namespace klspec
