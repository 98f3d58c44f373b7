//! The pages' words in pt-br, en and es, and which language a request gets: `?locale=`, then the
//! `cnpj_locale` cookie, then `Accept-Language`, else pt-br.

use axum::http::HeaderMap;

use crate::guard::cookie;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    PtBr,
    En,
    Es,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::PtBr => "pt-br",
            Lang::En => "en",
            Lang::Es => "es",
        }
    }

    /// `pt-BR` as HTML's `lang` writes it.
    pub fn html(self) -> &'static str {
        match self {
            Lang::PtBr => "pt-BR",
            Lang::En => "en",
            Lang::Es => "es",
        }
    }

    /// The locale of the registry's labels in this language.
    pub fn locale(self) -> cnpj_model::Locale {
        match self {
            Lang::PtBr => cnpj_model::Locale::PtBr,
            Lang::En => cnpj_model::Locale::En,
            Lang::Es => cnpj_model::Locale::Es,
        }
    }

    pub fn parse(text: &str) -> Option<Lang> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "pt-br" | "pt" | "pt_br" => Some(Lang::PtBr),
            "en" => Some(Lang::En),
            "es" => Some(Lang::Es),
            _ if t.starts_with("pt") => Some(Lang::PtBr),
            _ if t.starts_with("en") => Some(Lang::En),
            _ if t.starts_with("es") => Some(Lang::Es),
            _ => None,
        }
    }

    /// The request's language: `?locale=`, the cookie, `Accept-Language` (first known, by order).
    pub fn of(query: Option<&str>, headers: &HeaderMap) -> Lang {
        let asked = query.and_then(|q| {
            q.split('&').find_map(|p| p.strip_prefix("locale=")).and_then(|v| Lang::parse(&v.replace("%2D", "-")))
        });
        let accepted = || {
            let value = headers.get(axum::http::header::ACCEPT_LANGUAGE)?.to_str().ok()?;
            value.split(',').find_map(|part| Lang::parse(part.split(';').next().unwrap_or("")))
        };
        asked
            .or_else(|| cookie(headers, "cnpj_locale").and_then(|c| Lang::parse(&c)))
            .or_else(accepted)
            .unwrap_or(Lang::PtBr)
    }

    /// A word or sentence of the pages (the key itself when unknown: a test finds it).
    pub fn t(self, key: &str) -> &'static str {
        let Some((_, texts)) = TEXTS.iter().chain(COMPANY_TEXTS).chain(PARTNER_TEXTS).find(|(k, _)| *k == key) else {
            return "??";
        };
        texts[match self {
            Lang::PtBr => 0,
            Lang::En => 1,
            Lang::Es => 2,
        }]
    }
}

/// Key → [pt-br, en, es].
const TEXTS: &[(&str, [&str; 3])] = &[
    ("service", ["Registro CNPJ", "CNPJ Registry", "Registro CNPJ"]),
    ("signup", ["Criar conta", "Sign up", "Crear cuenta"]),
    ("login", ["Entrar", "Log in", "Iniciar sesión"]),
    ("logout", ["Sair", "Log out", "Cerrar sesión"]),
    ("email", ["E-mail", "Email", "Correo electrónico"]),
    ("password", ["Senha", "Password", "Contraseña"]),
    ("new_password", ["Nova senha", "New password", "Nueva contraseña"]),
    ("current_password", ["Senha atual", "Current password", "Contraseña actual"]),
    ("display_name", ["Nome", "Name", "Nombre"]),
    (
        "password_rules",
        [
            "Pelo menos 10 caracteres; não uma senha comum nem o seu e-mail.",
            "At least 10 characters; not a common password nor your email.",
            "Al menos 10 caracteres; no una contraseña común ni su correo.",
        ],
    ),
    ("login_failed", ["E-mail ou senha incorretos.", "Wrong email or password.", "Correo o contraseña incorrectos."]),
    (
        "too_many_tries",
        [
            "Muitas tentativas. Espere alguns minutos e tente de novo.",
            "Too many tries. Wait a few minutes and try again.",
            "Demasiados intentos. Espere unos minutos e inténtelo de nuevo.",
        ],
    ),
    ("forgot", ["Esqueci minha senha", "Forgot your password?", "Olvidé mi contraseña"]),
    (
        "forgot_sent",
        [
            "Se houver uma conta com esse e-mail, enviamos um link para criar uma nova senha. Sem envio de e-mail configurado, peça um link ao operador.",
            "If an account has this email, a link to choose a new password was sent. Where no mail is configured, ask the operator for a link.",
            "Si hay una cuenta con ese correo, enviamos un enlace para elegir una nueva contraseña. Sin correo configurado, pida un enlace al operador.",
        ],
    ),
    ("send_link", ["Enviar link", "Send the link", "Enviar enlace"]),
    ("reset", ["Nova senha", "Choose a new password", "Nueva contraseña"]),
    ("save", ["Salvar", "Save", "Guardar"]),
    (
        "link_invalid",
        [
            "Este link não é válido: expirou ou já foi usado.",
            "This link is not valid: it expired or was used already.",
            "Este enlace no es válido: caducó o ya se usó.",
        ],
    ),
    ("password_changed", ["Senha alterada.", "Password changed.", "Contraseña cambiada."]),
    (
        "verified",
        [
            "E-mail confirmado. Você já pode entrar.",
            "Email confirmed. You can log in now.",
            "Correo confirmado. Ya puede iniciar sesión.",
        ],
    ),
    (
        "check_mail",
        [
            "Enviamos um link de confirmação para o seu e-mail.",
            "A confirmation link was sent to your email.",
            "Enviamos un enlace de confirmación a su correo.",
        ],
    ),
    (
        "invite_needed",
        [
            "O cadastro é só por convite. Peça um link ao operador.",
            "Sign-up is by invitation only. Ask the operator for a link.",
            "El registro es solo por invitación. Pida un enlace al operador.",
        ],
    ),
    (
        "email_taken",
        [
            "Já existe uma conta com esse e-mail.",
            "An account with this email exists already.",
            "Ya existe una cuenta con ese correo.",
        ],
    ),
    ("email_invalid", ["Informe um e-mail válido.", "Give a valid email.", "Indique un correo válido."]),
    (
        "pw_short",
        [
            "A senha precisa de pelo menos 10 caracteres.",
            "The password needs at least 10 characters.",
            "La contraseña necesita al menos 10 caracteres.",
        ],
    ),
    (
        "pw_common",
        [
            "Essa senha é comum demais (está entre as 100.000 mais usadas, talvez com números no fim).",
            "This password is too common (among the 100,000 most used, perhaps with digits added at the end).",
            "Esa contraseña es demasiado común (está entre las 100.000 más usadas, quizá con números al final).",
        ],
    ),
    (
        "pw_blank",
        [
            "A senha não pode ser só espaços.",
            "The password cannot be only white space.",
            "La contraseña no puede ser solo espacios.",
        ],
    ),
    (
        "pw_repeated",
        [
            "A senha não pode ser um só caractere repetido.",
            "The password cannot be one character repeated.",
            "La contraseña no puede ser un solo carácter repetido.",
        ],
    ),
    (
        "pw_email",
        [
            "A senha não pode ser o seu e-mail.",
            "The password cannot be your email.",
            "La contraseña no puede ser su correo.",
        ],
    ),
    ("pw_long", ["A senha é longa demais.", "The password is too long.", "La contraseña es demasiado larga."]),
    ("pw_wrong", ["Senha incorreta.", "Wrong password.", "Contraseña incorrecta."]),
    (
        "forbidden",
        [
            "O formulário expirou ou não veio desta página. Recarregue e tente de novo.",
            "The form expired or did not come from this site. Reload the page and try again.",
            "El formulario caducó o no vino de este sitio. Recargue la página e inténtelo de nuevo.",
        ],
    ),
    ("not_found", ["Página não encontrada.", "Page not found.", "Página no encontrada."]),
    ("account", ["Minha conta", "My account", "Mi cuenta"]),
    ("plan", ["Plano", "Plan", "Plan"]),
    ("allowance", ["Franquia do mês restante", "Allowance left this month", "Franquicia restante del mes"]),
    ("credits", ["Créditos", "Credits", "Créditos"]),
    ("credits_remaining", ["Total disponível", "Available in all", "Disponible en total"]),
    ("rate_limit", ["Limite de requisições por minuto", "Requests per minute", "Solicitudes por minuto"]),
    ("tokens", ["Tokens de API", "API tokens", "Tokens de API"]),
    ("token_name", ["Nome do token", "Token name", "Nombre del token"]),
    ("prefix", ["Prefixo", "Prefix", "Prefijo"]),
    ("created", ["Criado em", "Created", "Creado"]),
    ("last_used", ["Último uso", "Last used", "Último uso"]),
    ("expires", ["Expira", "Expires", "Caduca"]),
    (
        "expiry_days",
        ["Validade em dias (vazio: sem validade)", "Expiry in days (empty: never)", "Validez en días (vacío: nunca)"],
    ),
    ("never", ["nunca", "never", "nunca"]),
    ("create_token", ["Criar token", "Create a token", "Crear token"]),
    ("revoke", ["Revogar", "Revoke", "Revocar"]),
    (
        "new_token",
        [
            "Seu novo token (mostrado só agora; guarde-o):",
            "Your new token (shown only now; keep it):",
            "Su nuevo token (solo se muestra ahora; guárdelo):",
        ],
    ),
    (
        "too_many_tokens",
        ["Seu plano não permite mais tokens.", "Your plan allows no more tokens.", "Su plan no permite más tokens."],
    ),
    ("usage", ["Uso nos últimos 30 dias", "Usage in the last 30 days", "Uso en los últimos 30 días"]),
    ("day", ["Dia", "Day", "Día"]),
    ("endpoint", ["Endpoint", "Endpoint", "Endpoint"]),
    ("requests", ["Requisições", "Requests", "Solicitudes"]),
    ("ledger", ["Últimos débitos", "Latest debits", "Últimos débitos"]),
    ("when", ["Quando", "When", "Cuándo"]),
    ("amount", ["Créditos", "Credits", "Créditos"]),
    ("what", ["O quê", "What", "Qué"]),
    ("nothing_yet", ["Nada ainda.", "Nothing yet.", "Nada todavía."]),
    ("change_password", ["Trocar senha", "Change password", "Cambiar contraseña"]),
    ("delete_account", ["Excluir conta", "Delete the account", "Eliminar la cuenta"]),
    (
        "delete_warning",
        [
            "Apaga e-mail, nome, senha, sessões, tokens e listas. O histórico de débitos e de uso fica, anônimo.",
            "Erases email, name, password, sessions, tokens and watchlists. The debit and usage history stays, anonymous.",
            "Borra correo, nombre, contraseña, sesiones, tokens y listas. El historial de débitos y de uso queda, anónimo.",
        ],
    ),
    ("deleted", ["Conta excluída.", "Account deleted.", "Cuenta eliminada."]),
    ("chart_title", ["Requisições por dia", "Requests per day", "Solicitudes por día"]),
    ("watchlists", ["Listas de acompanhamento", "Watchlists", "Listas de seguimiento"]),
    ("watchlist", ["Lista de acompanhamento", "Watchlist", "Lista de seguimiento"]),
    ("list_name", ["Nome da lista", "List name", "Nombre de la lista"]),
    ("entries_count", ["CNPJs", "CNPJs", "CNPJ"]),
    ("cnpjs_watched", ["CNPJs acompanhados", "CNPJs watched", "CNPJ seguidos"]),
    ("webhook", ["Webhook", "Webhook", "Webhook"]),
    ("none", ["nenhum", "none", "ninguno"]),
    ("events_followed", ["Eventos acompanhados", "Events followed", "Eventos seguidos"]),
    ("all_events", ["todos", "all", "todos"]),
    (
        "watched_of_cap",
        [
            "CNPJs acompanhados em todas as listas / limite do seu plano",
            "CNPJs watched over all your lists / your plan's limit",
            "CNPJ seguidos en todas sus listas / límite de su plan",
        ],
    ),
    ("create_list", ["Criar lista", "Create a list", "Crear lista"]),
    (
        "cnpjs_to_add",
        [
            "CNPJs a incluir, um por linha (até 1.000 por vez)",
            "CNPJs to add, one a line (up to 1,000 at once)",
            "CNPJ a añadir, uno por línea (hasta 1.000 a la vez)",
        ],
    ),
    (
        "cnpjs_to_remove",
        ["CNPJs a retirar, um por linha", "CNPJs to remove, one a line", "CNPJ a quitar, uno por línea"],
    ),
    (
        "cnpj_forms",
        [
            "Com ou sem pontuação. 14 caracteres acompanham o estabelecimento e sua empresa; 8 (a raiz), a empresa inteira.",
            "With or without punctuation. 14 characters follow that establishment and its company; 8 (the base), the whole company.",
            "Con o sin puntuación. 14 caracteres siguen ese establecimiento y su empresa; 8 (la raíz), la empresa entera.",
        ],
    ),
    ("webhook_url", ["Endereço do webhook", "Webhook URL", "Dirección del webhook"]),
    (
        "webhook_hint",
        [
            "Opcional: https. A cada mês, os eventos da lista são enviados para lá (1 crédito por entrega). Vazio: nenhum.",
            "Optional: https. Every month, the list's events are posted there (1 credit a delivery). Empty: none.",
            "Opcional: https. Cada mes, los eventos de la lista se envían allí (1 crédito por entrega). Vacío: ninguno.",
        ],
    ),
    ("save_webhook", ["Salvar webhook", "Save the webhook", "Guardar webhook"]),
    ("rotate_secret", ["Gerar novo segredo", "Make a new secret", "Generar nuevo secreto"]),
    (
        "rotate_hint",
        [
            "Um novo segredo substitui o atual: as próximas entregas são assinadas com ele.",
            "A new secret replaces the current one: the next deliveries are signed with it.",
            "Un nuevo secreto reemplaza al actual: las próximas entregas se firman con él.",
        ],
    ),
    (
        "new_secret",
        [
            "Segredo do webhook (mostrado só agora; guarde-o): assina cada entrega.",
            "The webhook's secret (shown only now; keep it): it signs every delivery.",
            "Secreto del webhook (solo se muestra ahora; guárdelo): firma cada entrega.",
        ],
    ),
    ("deliveries", ["Entregas do webhook", "Webhook deliveries", "Entregas del webhook"]),
    ("deliveries_shown", ["As {} mais recentes de {}.", "The {} newest of {}.", "Las {} más recientes de {}."]),
    ("month", ["Mês", "Month", "Mes"]),
    ("page", ["Página", "Page", "Página"]),
    ("attempts", ["Tentativas", "Attempts", "Intentos"]),
    ("last_error", ["Último erro", "Last error", "Último error"]),
    ("retry", ["Tentar de novo", "Retry", "Reintentar"]),
    ("delivery_pending", ["pendente", "pending", "pendiente"]),
    ("delivery_waiting_credits", ["aguardando créditos", "waiting for credits", "esperando créditos"]),
    ("delivery_delivered", ["entregue", "delivered", "entregada"]),
    ("delivery_failed", ["falhou", "failed", "fallida"]),
    ("previous", ["Anteriores", "Previous", "Anteriores"]),
    ("next", ["Seguintes", "Next", "Siguientes"]),
    ("delete_list", ["Excluir lista", "Delete the list", "Eliminar la lista"]),
    ("saved", ["Salvo.", "Saved.", "Guardado."]),
    ("list_created", ["Lista criada.", "List created.", "Lista creada."]),
    (
        "list_name_invalid",
        [
            "O nome da lista deve ter de 1 a 100 caracteres. Nada foi salvo.",
            "A list's name has 1 to 100 characters. Nothing was saved.",
            "El nombre de la lista debe tener de 1 a 100 caracteres. No se guardó nada.",
        ],
    ),
    (
        "too_many_cnpjs",
        [
            "No máximo 1.000 CNPJs por vez. Nada foi salvo.",
            "At most 1,000 CNPJs at once. Nothing was saved.",
            "Como máximo 1.000 CNPJ a la vez. No se guardó nada.",
        ],
    ),
    (
        "over_cap",
        [
            "Seu plano permite acompanhar até {} CNPJs em todas as listas; isto daria {}. Nada foi salvo.",
            "Your plan allows up to {} CNPJs watched over all your lists; this would make {}. Nothing was saved.",
            "Su plan permite seguir hasta {} CNPJ en todas sus listas; esto daría {}. No se guardó nada.",
        ],
    ),
    (
        "cnpjs_invalid",
        [
            "Estes CNPJs não são válidos; nada foi salvo:",
            "These CNPJs are not valid; nothing was saved:",
            "Estos CNPJ no son válidos; no se guardó nada:",
        ],
    ),
    (
        "cnpj_length",
        [
            "tem {} caracteres; um CNPJ tem 14 (ou 8, a raiz)",
            "has {} characters; a CNPJ has 14 (or 8, its base)",
            "tiene {} caracteres; un CNPJ tiene 14 (u 8, la raíz)",
        ],
    ),
    (
        "cnpj_character",
        ["o caractere {} não é permitido", "character {} is not allowed", "el carácter {} no está permitido"],
    ),
    (
        "cnpj_check_numeric",
        [
            "os dígitos verificadores devem ser números",
            "the check digits must be numbers",
            "los dígitos verificadores deben ser números",
        ],
    ),
    (
        "cnpj_check_digits",
        [
            "dígitos verificadores errados (esperados: {})",
            "wrong check digits (expected {})",
            "dígitos verificadores incorrectos (se esperaban {})",
        ],
    ),
    (
        "webhook_refused",
        ["Endereço de webhook recusado: {}.", "Webhook URL refused: {}.", "Dirección de webhook rechazada: {}."],
    ),
    ("webhook_scheme", ["deve começar com https://", "it must start with https://", "debe empezar por https://"]),
    (
        "webhook_malformed",
        [
            "não é um endereço válido (um host, sem espaços nem nome de usuário, até 2.048 bytes)",
            "it is not a valid URL (a host, no spaces nor user name, up to 2,048 bytes)",
            "no es una dirección válida (un host, sin espacios ni nombre de usuario, hasta 2.048 bytes)",
        ],
    ),
    (
        "webhook_private",
        [
            "leva a um endereço que não é público",
            "it leads to an address that is not public",
            "lleva a una dirección que no es pública",
        ],
    ),
    ("language", ["Idioma", "Language", "Idioma"]),
    ("admin", ["Administração", "Administration", "Administración"]),
    ("search_users", ["Buscar por e-mail ou nome", "Search by email or name", "Buscar por correo o nombre"]),
    ("search", ["Buscar", "Search", "Buscar"]),
    ("users", ["Usuários", "Users", "Usuarios"]),
    ("status", ["Situação", "Status", "Estado"]),
    ("last_activity", ["Última atividade", "Last activity", "Última actividad"]),
    ("requests_30d", ["Requisições (30 dias)", "Requests (30 days)", "Solicitudes (30 días)"]),
    ("credits_30d", ["Créditos (30 dias)", "Credits (30 days)", "Créditos (30 días)"]),
    ("grant", ["Conceder créditos", "Grant credits", "Conceder créditos"]),
    ("reason", ["Motivo", "Reason", "Motivo"]),
    ("status_active", ["ativo", "active", "activo"]),
    ("status_disabled", ["desativado", "disabled", "desactivado"]),
    ("status_unverified", ["não verificado", "unverified", "no verificado"]),
    ("enable", ["Reativar", "Enable", "Reactivar"]),
    ("disable", ["Desativar", "Disable", "Desactivar"]),
    ("revoke_any", ["Revogar um token", "Revoke a token", "Revocar un token"]),
    ("audit", ["Registro de ações", "Audit log", "Registro de acciones"]),
    ("detail", ["Detalhe", "Detail", "Detalle"]),
    ("mail_verify_subject", ["Confirme seu e-mail", "Confirm your email", "Confirme su correo"]),
    (
        "mail_verify_body",
        [
            "Para ativar sua conta, abra este link (válido por 7 dias):",
            "To activate your account, open this link (valid for 7 days):",
            "Para activar su cuenta, abra este enlace (válido por 7 días):",
        ],
    ),
    ("mail_taken_subject", ["Cadastro com o seu e-mail", "A sign-up with your email", "Registro con su correo"]),
    (
        "mail_taken_body",
        [
            "Alguém tentou criar uma conta com este e-mail, que já tem uma. Se foi você, entre com a sua senha ou escolha uma nova por este link; se não foi, ignore este e-mail.",
            "Someone tried to sign up with this email, which has an account already. If it was you, log in with your password or choose a new one at this link; if not, ignore this mail.",
            "Alguien intentó registrarse con este correo, que ya tiene una cuenta. Si fue usted, inicie sesión con su contraseña o elija una nueva en este enlace; si no, ignore este correo.",
        ],
    ),
    ("mail_reset_subject", ["Nova senha", "Choose a new password", "Nueva contraseña"]),
    (
        "mail_reset_body",
        [
            "Para escolher uma nova senha, abra este link (válido por 1 hora). Se não foi você, ignore este e-mail.",
            "To choose a new password, open this link (valid for 1 hour). If it was not you, ignore this mail.",
            "Para elegir una nueva contraseña, abra este enlace (válido por 1 hora). Si no fue usted, ignore este correo.",
        ],
    ),
    ("mail_export_subject", ["Sua exportação está pronta", "Your export is ready", "Su exportación está lista"]),
    (
        "mail_export_body",
        [
            "O arquivo da sua exportação está pronto. Baixe-o nesta página (depois de entrar):",
            "Your export's file is ready. Download it from this page (once logged in):",
            "El archivo de su exportación está listo. Descárguelo en esta página (después de iniciar sesión):",
        ],
    ),
    ("invalid", ["Valor inválido.", "Invalid value.", "Valor no válido."]),
];

/// The company pages' words (search, a company's page, export), key → [pt-br, en, es]; a
/// history event's name is `ev_<event>`, a changed field's `f_<field>`.
const COMPANY_TEXTS: &[(&str, [&str; 3])] = &[
    ("search_companies", ["Buscar empresas", "Search companies", "Buscar empresas"]),
    ("filters", ["Filtros", "Filters", "Filtros"]),
    ("all_filters", ["Todos os filtros", "Every filter", "Todos los filtros"]),
    ("any", ["Qualquer", "Any", "Cualquiera"]),
    ("abroad", ["EX (exterior)", "EX (abroad)", "EX (exterior)"]),
    ("state", ["UF", "State", "Estado (UF)"]),
    ("city", ["Município", "City", "Municipio"]),
    (
        "city_hint",
        [
            "Escolha a UF e atualize a lista para ver os municípios.",
            "Choose a state and update the list to see its cities.",
            "Elija el estado y actualice la lista para ver sus municipios.",
        ],
    ),
    ("update_cities", ["Atualizar municípios", "Update the cities", "Actualizar municipios"]),
    (
        "several_hint",
        [
            "Nenhum marcado: qualquer um. Para marcar vários, Ctrl (ou Cmd) e clique, ou Shift e as setas.",
            "None chosen: any. To choose several, Ctrl (or Cmd) and click, or Shift and the arrow keys.",
            "Ninguno marcado: cualquiera. Para marcar varios, Ctrl (o Cmd) y clic, o Mayús y las flechas.",
        ],
    ),
    ("activity", ["Atividade (CNAE)", "Activity (CNAE)", "Actividad (CNAE)"]),
    (
        "activity_hint",
        [
            "O código (4711-3/02) ou palavras da descrição.",
            "Its code (4711-3/02) or words of its description.",
            "Su código (4711-3/02) o palabras de su descripción.",
        ],
    ),
    ("choose_activity", ["Escolha a atividade", "Choose the activity", "Elija la actividad"]),
    (
        "activities_match",
        [
            "atividades têm essas palavras: escolha uma e busque.",
            "activities have these words: choose one and search.",
            "actividades tienen esas palabras: elija una y busque.",
        ],
    ),
    (
        "no_activity",
        [
            "Nenhuma atividade tem essas palavras.",
            "No activity has these words.",
            "Ninguna actividad tiene esas palabras.",
        ],
    ),
    ("reg_status", ["Situação cadastral", "Registration status", "Situación catastral"]),
    ("size", ["Porte", "Company size", "Tamaño"]),
    ("legal_nature", ["Natureza jurídica", "Legal nature", "Naturaleza jurídica"]),
    ("opened_from", ["Início de atividade a partir de", "Opened from", "Inicio de actividad desde"]),
    ("opened_to", ["Início de atividade até", "Opened until", "Inicio de actividad hasta"]),
    ("trading_name", ["Nome fantasia", "Trading name", "Nombre comercial"]),
    (
        "trading_name_hint",
        [
            "Parte do nome fantasia ou da razão social.",
            "Part of the trading name or of the legal name.",
            "Parte del nombre comercial o de la razón social.",
        ],
    ),
    ("neighborhood", ["Bairro", "Neighbourhood", "Barrio"]),
    (
        "secondary_too",
        [
            "Também entre as atividades secundárias",
            "Among the secondary activities too",
            "También entre las actividades secundarias",
        ],
    ),
    ("capital_from", ["Capital social a partir de (R$)", "Share capital from (R$)", "Capital social desde (R$)"]),
    ("capital_to", ["Capital social até (R$)", "Share capital up to (R$)", "Capital social hasta (R$)"]),
    (
        "capital_hint",
        [
            "Em reais, com ponto antes dos centavos e sem separador de milhar (100000 ou 1500.50).",
            "In reais, a point before the cents and no thousands separator (100000 or 1500.50).",
            "En reales, con punto antes de los centavos y sin separador de miles (100000 o 1500.50).",
        ],
    ),
    ("has_email", ["Com e-mail", "With an email", "Con correo electrónico"]),
    ("has_phone", ["Com telefone", "With a phone number", "Con teléfono"]),
    ("head_office", ["Matriz", "Head office", "Casa matriz"]),
    ("mei", ["Optante pelo MEI", "Opted for the MEI", "Optante por el MEI"]),
    ("cep", ["CEP", "Postal code (CEP)", "Código postal (CEP)"]),
    (
        "cep_hint",
        ["O CEP ou o seu começo (01310).", "The code or its beginning (01310).", "El código o su comienzo (01310)."],
    ),
    ("cnpj", ["CNPJ", "CNPJ", "CNPJ"]),
    (
        "cnpj_hint",
        [
            "14 caracteres (um estabelecimento) ou 8 (a empresa toda).",
            "14 characters (one establishment) or 8 (the whole company).",
            "14 caracteres (un establecimiento) u 8 (toda la empresa).",
        ],
    ),
    ("per_page", ["Resultados por página", "Results per page", "Resultados por página"]),
    (
        "search_price",
        [
            "Uma busca com resultados custa o mesmo que na API (1 crédito); sem resultados, nada.",
            "A search with results costs what it costs on the API (1 credit); without results, nothing.",
            "Una búsqueda con resultados cuesta lo mismo que en la API (1 crédito); sin resultados, nada.",
        ],
    ),
    ("give_a_filter", ["Informe ao menos um filtro.", "Give at least one filter.", "Indique al menos un filtro."]),
    ("results", ["Resultados", "Results", "Resultados"]),
    ("no_results", ["Nenhuma empresa encontrada.", "No company found.", "Ninguna empresa encontrada."]),
    ("pages", ["Páginas", "Pages", "Páginas"]),
    ("first", ["Primeira", "First", "Primera"]),
    ("previous_page", ["Anterior", "Previous", "Anterior"]),
    ("next_page", ["Próxima", "Next", "Siguiente"]),
    ("last", ["Última", "Last", "Última"]),
    ("company_name", ["Razão social", "Legal name", "Razón social"]),
    ("main_activity", ["Atividade principal", "Main activity", "Actividad principal"]),
    ("opening_date", ["Início de atividade", "Opened", "Inicio de actividad"]),
    ("company", ["Empresa", "Company", "Empresa"]),
    ("company_not_found", ["Empresa não encontrada.", "Company not found.", "Empresa no encontrada."]),
    (
        "price_detail",
        [
            "Cada visita a esta página custa o mesmo que um detalhe na API (1 crédito).",
            "Each visit of this page costs what a detail costs on the API (1 credit).",
            "Cada visita a esta página cuesta lo mismo que un detalle en la API (1 crédito).",
        ],
    ),
    (
        "gone",
        [
            "Este CNPJ não está no mês publicado: só o seu histórico é mostrado.",
            "This CNPJ is not in the month served: only its history is shown.",
            "Este CNPJ no está en el mes publicado: solo se muestra su historial.",
        ],
    ),
    ("identity", ["Identificação", "Identity", "Identificación"]),
    ("head_or_branch", ["Matriz ou filial", "Head office or branch", "Matriz o sucursal"]),
    ("capital", ["Capital social", "Share capital", "Capital social"]),
    (
        "federative_entity",
        ["Ente federativo responsável", "Responsible federative entity", "Ente federativo responsable"],
    ),
    ("status_date", ["Data da situação cadastral", "Status date", "Fecha de la situación"]),
    ("status_reason", ["Motivo da situação cadastral", "Status reason", "Motivo de la situación"]),
    ("special_status", ["Situação especial", "Special status", "Situación especial"]),
    ("special_status_date", ["Data da situação especial", "Special status date", "Fecha de la situación especial"]),
    ("address", ["Endereço", "Address", "Dirección"]),
    ("street", ["Logradouro", "Street", "Calle"]),
    ("number", ["Número", "Number", "Número"]),
    ("complement", ["Complemento", "Complement", "Complemento"]),
    ("country", ["País", "Country", "País"]),
    (
        "one_line_address",
        [
            "Endereço em uma linha (um clique o seleciona para copiar):",
            "The address on one line (a click selects it, to copy):",
            "La dirección en una línea (un clic la selecciona para copiar):",
        ],
    ),
    ("contact", ["Contato", "Contact", "Contacto"]),
    ("phone", ["Telefone", "Telephone", "Teléfono"]),
    ("fax", ["Fax", "Fax", "Fax"]),
    ("none_here", ["Nenhum.", "None.", "Ninguno."]),
    ("activities", ["Atividades", "Activities", "Actividades"]),
    ("secondary_activities", ["Atividades secundárias", "Secondary activities", "Actividades secundarias"]),
    ("tax", ["Tributação", "Taxation", "Tributación"]),
    ("simples", ["Optante pelo Simples Nacional", "Opted for Simples Nacional", "Optante por el Simples Nacional"]),
    ("tax_regime", ["Regime tributário", "Tax regime", "Régimen tributario"]),
    ("yes", ["Sim", "Yes", "Sí"]),
    ("no", ["Não", "No", "No"]),
    ("partners", ["Quadro de sócios", "Partners", "Socios"]),
    ("partner_name", ["Nome", "Name", "Nombre"]),
    ("qualification", ["Qualificação", "Qualification", "Calificación"]),
    ("partner_type", ["Tipo", "Type", "Tipo"]),
    ("document", ["Documento (mascarado)", "Document (masked)", "Documento (enmascarado)"]),
    ("entry_date", ["Data de entrada", "Entered", "Fecha de entrada"]),
    ("age_range", ["Faixa etária", "Age range", "Franja de edad"]),
    ("representative", ["Representante legal", "Legal representative", "Representante legal"]),
    ("watch", ["Acompanhar", "Watch", "Seguir"]),
    ("watch_list", ["Lista", "List", "Lista"]),
    (
        "whole_company",
        [
            "A empresa toda (todos os estabelecimentos)",
            "The whole company (every establishment)",
            "Toda la empresa (todos los establecimientos)",
        ],
    ),
    ("add_to_list", ["Adicionar à lista", "Add to the list", "Añadir a la lista"]),
    (
        "no_watchlists",
        [
            "Você ainda não tem listas de acompanhamento; crie uma na sua conta.",
            "You have no watchlist yet; make one on your account.",
            "Aún no tiene listas de seguimiento; cree una en su cuenta.",
        ],
    ),
    ("watched", ["Adicionado à lista.", "Added to the list.", "Añadido a la lista."]),
    ("back_to_company", ["Voltar à empresa", "Back to the company", "Volver a la empresa"]),
    (
        "establishments",
        ["Estabelecimentos da empresa", "The company's establishments", "Establecimientos de la empresa"],
    ),
    ("this_one", ["este", "this one", "este"]),
    ("history", ["Histórico de alterações", "History of changes", "Historial de cambios"]),
    ("no_history", ["Nenhuma alteração registrada.", "No change recorded.", "Ningún cambio registrado."]),
    ("became", ["passou a", "became", "pasó a"]),
    ("export", ["Exportar", "Export", "Exportar"]),
    ("export_csv", ["Exportar em CSV", "Export as CSV", "Exportar en CSV"]),
    ("export_all", ["Exportar o resultado inteiro", "Export the whole result", "Exportar el resultado completo"]),
    (
        "export_all_link",
        [
            "Exportar todas as {} linhas ({} créditos)",
            "Export all {} rows ({} credits)",
            "Exportar las {} filas ({} créditos)",
        ],
    ),
    ("export_format", ["Formato", "Format", "Formato"]),
    (
        "export_job_note",
        [
            "O arquivo é preparado em segundo plano; a página seguinte mostra o andamento e o link para baixá-lo.",
            "The file is made in the background; the next page shows its progress and the link to download it.",
            "El archivo se prepara en segundo plano; la página siguiente muestra el avance y el enlace para descargarlo.",
        ],
    ),
    ("export_job", ["Exportação", "Export", "Exportación"]),
    ("export_job_status", ["Situação", "Status", "Estado"]),
    ("export_job_written", ["Linhas escritas", "Rows written", "Filas escritas"]),
    ("export_job_progress", ["Andamento", "Progress", "Avance"]),
    (
        "export_job_refresh",
        [
            "Esta página se atualiza sozinha a cada poucos segundos.",
            "This page refreshes itself every few seconds.",
            "Esta página se actualiza sola cada pocos segundos.",
        ],
    ),
    ("export_job_download", ["Baixar o arquivo", "Download the file", "Descargar el archivo"]),
    ("export_job_expires", ["Disponível até", "Available until", "Disponible hasta"]),
    (
        "export_job_failed",
        [
            "A exportação falhou; os créditos foram devolvidos.",
            "The export failed; its credits were refunded.",
            "La exportación falló; los créditos fueron devueltos.",
        ],
    ),
    ("job_queued", ["Na fila", "Queued", "En cola"]),
    ("job_running", ["Em andamento", "Running", "En curso"]),
    ("job_done", ["Pronta", "Done", "Lista"]),
    ("job_failed", ["Falhou", "Failed", "Falló"]),
    ("job_expired", ["Expirada", "Expired", "Expirada"]),
    ("export_found", ["Empresas encontradas", "Companies found", "Empresas encontradas"]),
    ("export_rows", ["Linhas exportadas", "Rows exported", "Filas exportadas"]),
    (
        "export_rows_asked",
        ["Linhas a exportar (até 10.000)", "Rows to export (up to 10,000)", "Filas a exportar (hasta 10.000)"],
    ),
    ("export_cost", ["Custo em créditos (1 por linha)", "Cost in credits (1 a row)", "Costo en créditos (1 por fila)"]),
    ("update", ["Atualizar", "Update", "Actualizar"]),
    ("ask_first", ["Abrir esta página?", "Open this page?", "¿Abrir esta página?"]),
    (
        "ask_why",
        [
            "Você chegou aqui por um link de fora deste site. Esta página é cobrada dos seus créditos; nada foi \
             cobrado ainda.",
            "You came here by a link from outside this site. This page is charged to your credits; nothing has \
             been charged yet.",
            "Llegó aquí por un enlace de fuera de este sitio. Esta página se cobra de sus créditos; todavía no se \
             cobró nada.",
        ],
    ),
    (
        "price_company",
        [
            "Preço em créditos (se a empresa for encontrada)",
            "Price in credits (if the company is found)",
            "Precio en créditos (si se encuentra la empresa)",
        ],
    ),
    (
        "price_search",
        [
            "Preço em créditos (se a busca encontrar empresas)",
            "Price in credits (if the search finds companies)",
            "Precio en créditos (si la búsqueda encuentra empresas)",
        ],
    ),
    ("go_on", ["Continuar e abrir", "Go on and open it", "Continuar y abrirla"]),
    ("confirm_export", ["Confirmar e baixar", "Confirm and download", "Confirmar y descargar"]),
    (
        "confirm_export_job",
        ["Confirmar e preparar o arquivo", "Confirm and prepare the file", "Confirmar y preparar el archivo"],
    ),
    ("nothing_to_export", ["Nada a exportar.", "Nothing to export.", "Nada que exportar."]),
    ("back_to_search", ["Voltar à busca", "Back to the search", "Volver a la búsqueda"]),
    (
        "no_credits",
        [
            "Créditos insuficientes: nada foi cobrado.",
            "Not enough credits: nothing was charged.",
            "Créditos insuficientes: no se cobró nada.",
        ],
    ),
    (
        "too_many_requests",
        [
            "Muitas requisições. Espere um pouco e tente de novo.",
            "Too many requests. Wait a little and try again.",
            "Demasiadas solicitudes. Espere un poco e inténtelo de nuevo.",
        ],
    ),
    (
        "failed",
        [
            "Algo deu errado do nosso lado. Tente de novo.",
            "Something went wrong on our side. Try again.",
            "Algo salió mal de nuestro lado. Inténtelo de nuevo.",
        ],
    ),
    ("ev_opened", ["Aberto", "Opened", "Abierto"]),
    ("ev_disappeared", ["Saiu do cadastro", "Disappeared", "Desapareció"]),
    ("ev_status_changed", ["Situação cadastral alterada", "Status changed", "Situación cambiada"]),
    ("ev_moved", ["Endereço alterado", "Moved", "Dirección cambiada"]),
    ("ev_renamed", ["Nome alterado", "Renamed", "Nombre cambiado"]),
    (
        "ev_main_activity_changed",
        ["Atividade principal alterada", "Main activity changed", "Actividad principal cambiada"],
    ),
    (
        "ev_secondary_activities_changed",
        ["Atividades secundárias alteradas", "Secondary activities changed", "Actividades secundarias cambiadas"],
    ),
    ("ev_legal_nature_changed", ["Natureza jurídica alterada", "Legal nature changed", "Naturaleza jurídica cambiada"]),
    ("ev_capital_changed", ["Capital social alterado", "Capital changed", "Capital cambiado"]),
    ("ev_size_changed", ["Porte alterado", "Size changed", "Tamaño cambiado"]),
    ("ev_partner_entered", ["Entrada de sócio", "Partner entered", "Entrada de socio"]),
    ("ev_partner_left", ["Saída de sócio", "Partner left", "Salida de socio"]),
    ("ev_simples_opted_in", ["Opção pelo Simples", "Opted into Simples", "Opción por el Simples"]),
    ("ev_simples_opted_out", ["Exclusão do Simples", "Opted out of Simples", "Exclusión del Simples"]),
    ("ev_mei_opted_in", ["Opção pelo MEI", "Opted into MEI", "Opción por el MEI"]),
    ("ev_mei_opted_out", ["Exclusão do MEI", "Opted out of MEI", "Exclusión del MEI"]),
    ("ev_tax_regime_changed", ["Regime tributário alterado", "Tax regime changed", "Régimen tributario cambiado"]),
    ("f_situacao_cadastral", ["Situação cadastral", "Registration status", "Situación catastral"]),
    ("f_municipio", ["Município", "City", "Municipio"]),
    ("f_cep", ["CEP", "Postal code", "Código postal"]),
    ("f_logradouro", ["Logradouro", "Street", "Calle"]),
    ("f_nome_fantasia", ["Nome fantasia", "Trading name", "Nombre comercial"]),
    ("f_razao_social", ["Razão social", "Legal name", "Razón social"]),
    ("f_cnae_fiscal", ["Atividade principal", "Main activity", "Actividad principal"]),
    ("f_cnaes_secundarios", ["Atividades secundárias", "Secondary activities", "Actividades secundarias"]),
    ("f_natureza_juridica", ["Natureza jurídica", "Legal nature", "Naturaleza jurídica"]),
    ("f_capital_social", ["Capital social", "Share capital", "Capital social"]),
    ("f_porte_empresa", ["Porte", "Company size", "Tamaño"]),
    ("f_socios", ["Sócio", "Partner", "Socio"]),
    ("f_opcao_simples", ["Opção pelo Simples", "Simples option", "Opción por el Simples"]),
    ("f_opcao_mei", ["Opção pelo MEI", "MEI option", "Opción por el MEI"]),
    ("f_regime_tributario", ["Regime tributário", "Tax regime", "Régimen tributario"]),
];

/// The words of the partners' pages and of a company's network (contract §14).
const PARTNER_TEXTS: &[(&str, [&str; 3])] = &[
    ("net_title", ["Rede de sócios de {}", "Network of the partners of {}", "Red de socios de {}"]),
    (
        "net_desc",
        [
            "{} empresas, {} sócios e {} ligações, até {} níveis a partir da empresa.",
            "{} companies, {} partners and {} links, up to {} levels from the company.",
            "{} empresas, {} socios y {} vínculos, hasta {} niveles desde la empresa.",
        ],
    ),
    (
        "net_truncated",
        ["Rede incompleta: cortada em {} nós.", "Incomplete: cut at {} nodes.", "Red incompleta: cortada en {} nodos."],
    ),
    ("net_company", ["Empresa", "Company", "Empresa"]),
    ("net_root", ["A empresa consultada", "This company", "La empresa consultada"]),
    ("net_person", ["Sócio pessoa física", "Partner: a person", "Socio persona física"]),
    ("net_entity", ["Sócio pessoa jurídica", "Partner: a legal entity", "Socio persona jurídica"]),
    ("net_foreign", ["Sócio estrangeiro", "Partner: foreign", "Socio extranjero"]),
    ("net_partner_of", ["é sócio de", "is a partner of", "es socio de"]),
    ("net_is_company", ["é a mesma empresa", "is the same company", "es la misma empresa"]),
    ("partner", ["Sócio", "Partner", "Socio"]),
    ("partner_not_found", ["Sócio não encontrado.", "Partner not found.", "Socio no encontrado."]),
    (
        "price_partner",
        [
            "Preço em créditos (se o sócio for encontrado)",
            "Price in credits (if the partner is found)",
            "Precio en créditos (si se encuentra el socio)",
        ],
    ),
    (
        "price_network",
        [
            "Preço em créditos (se a empresa for encontrada)",
            "Price in credits (if the company is found)",
            "Precio en créditos (si se encuentra la empresa)",
        ],
    ),
    ("identity_rule", ["Quem é este sócio", "Who this partner is", "Quién es este socio"]),
    (
        "identity_name_and_masked_document",
        [
            "Pessoas com o mesmo nome e os mesmos seis dígitos do CPF são contadas como um só sócio: o cadastro \
             não mostra mais do CPF.",
            "People with the same name and the same six digits of the CPF are counted as one partner: the \
             registry shows no more of the CPF.",
            "Las personas con el mismo nombre y los mismos seis dígitos del CPF se cuentan como un solo socio: el \
             registro no muestra más del CPF.",
        ],
    ),
    (
        "identity_company",
        [
            "Uma pessoa jurídica: a empresa cuja raiz (8 primeiros caracteres) começa o seu CNPJ.",
            "A legal entity: the company whose base (first 8 characters) starts its CNPJ.",
            "Una persona jurídica: la empresa cuya raíz (8 primeros caracteres) inicia su CNPJ.",
        ],
    ),
    (
        "identity_name",
        [
            "Uma pessoa jurídica sem CNPJ válido no cadastro: conhecida pelo nome.",
            "A legal entity without a valid CNPJ in the registry: known by its name.",
            "Una persona jurídica sin CNPJ válido en el registro: conocida por su nombre.",
        ],
    ),
    (
        "identity_name_and_country",
        [
            "Um sócio estrangeiro: conhecido pelo nome e pelo país.",
            "A foreign partner: known by its name and its country.",
            "Un socio extranjero: conocido por su nombre y su país.",
        ],
    ),
    ("first_entry", ["Primeira entrada", "First entry", "Primera entrada"]),
    ("own_company", ["A empresa deste sócio", "This partner's own company", "La empresa de este socio"]),
    ("partner_companies", ["Empresas de que é sócio", "Companies it is a partner of", "Empresas de las que es socio"]),
    ("partner_events", ["Entradas e saídas", "Entries and exits", "Entradas y salidas"]),
    (
        "no_partner_events",
        [
            "Nenhuma entrada ou saída nos meses guardados.",
            "No entry or exit in the months kept.",
            "Ninguna entrada o salida en los meses guardados.",
        ],
    ),
    ("network", ["Rede de sócios", "Partner network", "Red de socios"]),
    ("see_network", ["Ver a rede de sócios", "See the partner network", "Ver la red de socios"]),
    ("depth", ["Níveis", "Levels", "Niveles"]),
    ("max_nodes", ["Máximo de nós", "Most nodes", "Máximo de nodos"]),
    ("active_only", ["Só empresas ativas", "Active companies only", "Solo empresas activas"]),
    ("draw", ["Desenhar", "Draw", "Dibujar"]),
    ("downloads", ["Baixar os dados", "Download the data", "Descargar los datos"]),
    (
        "download_price",
        [
            "Cada arquivo custa o mesmo que esta página.",
            "Each file costs what this page costs.",
            "Cada archivo cuesta lo mismo que esta página.",
        ],
    ),
    ("links_csv", ["Ligações (CSV)", "Links (CSV)", "Vínculos (CSV)"]),
    ("network_json", ["Rede (JSON)", "Network (JSON)", "Red (JSON)"]),
    (
        "network_graphml",
        ["Rede (GraphML: Gephi, networkx)", "Network (GraphML: Gephi, networkx)", "Red (GraphML: Gephi, networkx)"],
    ),
    (
        "network_nodes",
        ["Empresas e sócios da rede", "Companies and partners in the network", "Empresas y socios de la red"],
    ),
    ("level", ["Nível", "Level", "Nivel"]),
];

/// `text` with each `{}` replaced by the next of `values`.
pub(crate) fn fill(text: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split("{}").enumerate() {
        if i > 0 {
            out.push_str(values.get(i - 1).copied().unwrap_or_default());
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(query: Option<&str>, cookie: Option<&str>, accept: Option<&str>, expected: Lang) {
        let mut headers = HeaderMap::new();
        if let Some(c) = cookie {
            headers.insert("cookie", format!("cnpj_locale={c}").parse().unwrap());
        }
        if let Some(a) = accept {
            headers.insert("accept-language", a.parse().unwrap());
        }
        assert_eq!(Lang::of(query, &headers), expected, "{query:?} {cookie:?} {accept:?}");
    }

    #[test]
    fn the_query_then_the_cookie_then_accept_language() {
        check(Some("locale=es"), Some("en"), Some("pt-BR"), Lang::Es);
        check(Some("x=1"), Some("en"), Some("es"), Lang::En);
        check(None, None, Some("fr-FR, es;q=0.8, en;q=0.5"), Lang::Es);
        check(None, None, Some("fr"), Lang::PtBr);
        check(None, None, None, Lang::PtBr);
    }

    #[test]
    fn texts_are_filled_in_order() {
        assert_eq!(fill("{} of {}", &["3", "10"]), "3 of 10");
        assert_eq!(fill("a {} b", &["{}"]), "a {} b", "a value is not filled again");
        assert_eq!(fill("{}", &[]), "");
    }

    #[test]
    fn every_text_is_in_three_languages() {
        let mut keys = std::collections::HashSet::new();
        for (key, texts) in TEXTS.iter().chain(COMPANY_TEXTS).chain(PARTNER_TEXTS) {
            assert!(texts.iter().all(|t| !t.is_empty()), "{key}");
            assert!(keys.insert(key), "{key} twice");
        }
        assert_eq!(Lang::En.t("login"), "Log in");
        assert_eq!(Lang::Es.t("nope"), "??");
    }
}
