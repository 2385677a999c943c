//! What every console page carries around its own content (`templates/operator/base.html`):
//! the site's stylesheet, named as the shop's pages name it (`app::site_files`), the
//! navigation once logged in, the CSRF token its forms send back, and the notice an action
//! left for it.

use app::site_files::SiteFiles;

use super::auth::{self, Operator};

pub(super) struct Chrome {
    /// The address of the stylesheet the build produced (hashed or plain, as built).
    pub stylesheet: String,
    pub logged_in: bool,
    pub csrf: String,
    pub notice: Option<String>,
}

impl Chrome {
    /// A logged-in operator's page; the notice left for it is taken, so it shows once.
    pub async fn operator(site: &SiteFiles, operator: &Operator) -> Self {
        Self {
            stylesheet: site.stylesheet_href(),
            logged_in: true,
            csrf: operator.csrf.clone(),
            notice: auth::take_notice(&operator.session).await,
        }
    }

    /// A page before the login: no navigation.
    pub fn visitor(site: &SiteFiles, csrf: String, notice: Option<String>) -> Self {
        Self {
            stylesheet: site.stylesheet_href(),
            logged_in: false,
            csrf,
            notice,
        }
    }
}
