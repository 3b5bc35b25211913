#include "engine/ngram_drafter.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "engine/common_log.h"
#include "speculative.h"  // llama.cpp's common library (include/llama-common)

namespace klspec {
namespace {

constexpr int32_t kMaxNgramSize = 1024;
constexpr std::array<std::string_view, 5> kNgramTypes = {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod",
                                                         "ngram-cache"};

}  // namespace

std::span<const std::string_view> ngram_type_names() { return kNgramTypes; }

void validate(const NgramOptions& options) {
    for (const std::string& type : options.types)
        if (std::find(kNgramTypes.begin(), kNgramTypes.end(), type) == kNgramTypes.end())
            throw Error(fmt::format("unknown n-gram drafter '{}' (one of: {})", type, fmt::join(kNgramTypes, ", ")));
    // llama.cpp's bounds (common/arg.cpp); its sizes are 16-bit.
    const auto in_range = [](int32_t value, int32_t low) { return value >= low && value <= kMaxNgramSize; };
    if (!in_range(options.size_n, 1) || !in_range(options.size_m, 1) || !in_range(options.min_hits, 1))
        throw Error(fmt::format("n-gram sizes must be in 1..{}, got size-n {}, size-m {}, min-hits {}", kMaxNgramSize,
                                options.size_n, options.size_m, options.min_hits));
    if (!in_range(options.mod_n_match, 1) || !in_range(options.mod_n_min, 0) || !in_range(options.mod_n_max, 1) ||
        options.mod_n_min > options.mod_n_max)
        throw Error(fmt::format("ngram-mod needs n-match in 1..{0} and 0 <= n-min <= n-max <= {0}, got {1}, {2}, {3}",
                                kMaxNgramSize, options.mod_n_match, options.mod_n_min, options.mod_n_max));
}

void NgramDrafter::Free::operator()(common_speculative* spec) const { common_speculative_free(spec); }

NgramDrafter::NgramDrafter(const NgramOptions& options, int32_t n_sequences)
    : histories_(static_cast<size_t>(n_sequences)), drafts_(static_cast<size_t>(n_sequences)) {
    validate(options);
    silence_common_log();
    common_params_speculative params;
    params.types.clear();
    for (const std::string& type : options.types) params.types.push_back(common_speculative_type_from_name(type));
    for (common_params_speculative_ngram_map* map :
         {&params.ngram_simple, &params.ngram_map_k, &params.ngram_map_k4v}) {
        map->size_n = static_cast<uint16_t>(options.size_n);
        map->size_m = static_cast<uint16_t>(options.size_m);
        map->min_hits = static_cast<uint16_t>(options.min_hits);
    }
    params.ngram_mod.n_match = options.mod_n_match;
    params.ngram_mod.n_min = options.mod_n_min;
    params.ngram_mod.n_max = options.mod_n_max;
    spec_.reset(common_speculative_init(params, static_cast<uint32_t>(n_sequences)));
    if (!spec_) throw Error("llama.cpp's common_speculative_init made no n-gram drafter");
}

NgramDrafter::~NgramDrafter() = default;

void NgramDrafter::begin(int32_t id, std::span<const int32_t> tokens) {
    std::vector<int32_t>& history = histories_.at(static_cast<size_t>(id));
    history.assign(tokens.begin(), tokens.end() - std::ptrdiff_t(tokens.empty() ? 0 : 1));
    drafts_[static_cast<size_t>(id)].clear();
    common_speculative_begin(spec_.get(), id, history);
}

void NgramDrafter::request(int32_t id, std::span<const int32_t> tokens, int32_t max_length) {
    const size_t i = static_cast<size_t>(id);
    if (tokens.empty() || max_length < 1) throw Error("NgramDrafter::request: no tokens or a draft length below 1");
    // llama.cpp's drafters read the tokens before the last one, and the last one apart. The id's tokens only
    // grow after begin(): the history takes the new ones.
    std::vector<int32_t>& history = histories_.at(i);
    if (history.size() >= tokens.size())
        throw Error("NgramDrafter::request: the id's tokens did not grow since begin()");
    history.insert(history.end(), tokens.begin() + std::ptrdiff_t(history.size()), tokens.end() - 1);
    drafts_[i].clear();
    common_speculative_get_draft_params(spec_.get(), id) = {
        /*.drafting =*/true,
        /*.n_max =*/max_length,
        /*.pos0 =*/static_cast<llama_pos>(tokens.size() - 1),
        /*.id_last =*/tokens.back(),
        /*.prompt =*/&histories_[i],
        /*.result =*/&drafts_[i],
    };
}

// common_speculative_draft cuts each draft to its n_max and clears every id's request.
void NgramDrafter::draft_requested() { common_speculative_draft(spec_.get()); }

void NgramDrafter::accept(int32_t id, int32_t accepted) {
    common_speculative_accept(spec_.get(), id, static_cast<uint16_t>(std::clamp(accepted, 0, 65535)));
}

}  // namespace klspec
